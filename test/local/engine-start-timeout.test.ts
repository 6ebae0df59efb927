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

test("a start that times out says the engine's last lines, in the 503 the openai client raises and in the model's lastError (found by a probe)", async () => {
  // Before: "engine m-1 not ready within startTimeout (2s)", and nothing of what it printed.
  const script = [
    "echo 'INFO loading the model'",
    "echo 'ERROR torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB' >&2",
    "exec sleep 60",
  ].join("; ");
  snooze = await startWith(`
models:
  m:
    startTimeout: 2s
    command: ["sh", "-c", ${JSON.stringify(script)}, "\${PORT}"]
`);
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
  snooze = await startWith(`
models:
  m:
    startTimeout: 1s
    command: ["sleep", "60", "\${PORT}"]
`);
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(response.status).toBe(503);
  const { error } = (await response.json()) as { error: { message: string } };
  expect(error.message).toMatch(/not ready within startTimeout \(1s\)$/);
});
