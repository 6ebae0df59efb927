import OpenAI from "openai";
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { startWith } from "../helpers/local-snooze.ts";

// An engine that says why it cannot come up and then hangs, never listening (vLLM waiting on an
// engine core that failed, a wrapper script that waits), fails its start at `startTimeout`: the
// answer says what the engine said last, as the failure of one that exits does.

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/** Snooze serving one model `m`, whose engine runs `command` and never listens. */
async function startHanging(command: string[], startTimeout: string): Promise<LocalSnooze> {
  snooze = await startWith(`
models:
  m:
    startTimeout: ${startTimeout}
    command: ${JSON.stringify(command)}
`);
  return snooze;
}

/** The message of the 503 a chat request for `m` gets. */
async function refusal(snooze: LocalSnooze): Promise<string> {
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(response.status).toBe(503);
  return ((await response.json()) as { error: { message: string } }).error.message;
}

test("a start that times out says the engine's last lines, in the 503 the openai client raises and in the model's lastError (found by a probe)", async () => {
  // Before: "engine m-1 not ready within startTimeout (2s)", and nothing of what it printed.
  const script = [
    "echo 'INFO loading the model'",
    "echo 'ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2",
    "exec sleep 60",
  ].join("; ");
  const snooze = await startHanging(["sh", "-c", script, "${PORT}"], "2s");
  const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
  const failure = await client.chat.completions
    .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
    .then(
      () => undefined,
      (error: unknown) => error,
    );
  expect(failure).toBeInstanceOf(OpenAI.APIError);
  const error = failure as InstanceType<typeof OpenAI.APIError>;
  expect(error.status).toBe(503);
  expect(error.code).toBe("activation_failed");
  const said =
    /not ready within startTimeout \(2s\); its last output: INFO loading the model \| ERROR torch\.OutOfMemoryError: CUDA out of memory/;
  expect(error.message).toMatch(said);
  const { models } = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as {
    models: { id: string; lastError?: string }[];
  };
  expect(models.find((m) => m.id === "m")?.lastError).toMatch(said);
});

test("a start that times out with an engine that printed nothing says only the timeout", async () => {
  const message = await refusal(await startHanging(["sleep", "60", "${PORT}"], "1s"));
  expect(message).toMatch(/not ready within startTimeout \(1s\)$/);
});

test("a start that times out says the line the engine is still writing: a prompt, a progress bar's state after its carriage return (found by an outside tester)", async () => {
  // Before: "its last output: INFO loading the model", without the line it hung on, which the
  // failure of an engine that exits after writing it does say.
  const script = [
    "echo 'INFO loading the model'",
    "printf 'Loading safetensors shards:  10%%\\rLoading safetensors shards:  40%%' >&2",
    "sleep 0.3",
    "printf 'Enter your Hugging Face token: '",
    "exec sleep 60",
  ].join("; ");
  const message = await refusal(await startHanging(["sh", "-c", script, "${PORT}"], "2s"));
  expect(message).toMatch(
    /not ready within startTimeout \(2s\); its last output: Loading safetensors shards: {2}10% \| Loading safetensors shards: {2}40% \| Enter your Hugging Face token: $/,
  );
});
