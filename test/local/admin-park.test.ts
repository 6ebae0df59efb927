import { spawn } from "node:child_process";
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * A person's sleep or stop asked while a request is held for a model that is starting: the request
 * was there first and is answered, then the model sleeps or stops, and the admin call answers once
 * it has (it used to be cancelled by that held request, and to answer 200 two minutes later).
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const tierOf = async (url: string) => {
  const { models } = (await (await fetch(`${url}/snooze/v1/models`)).json()) as {
    models: { id: string; tier: string }[];
  };
  return models.find((m) => m.id === "m")?.tier;
};

for (const [verb, after] of [
  ["stop", "cold"],
  ["sleep", "asleep-1"],
] as const) {
  test(`${verb} during a start with a request held: the request is answered, then the model is ${after}`, async () => {
    snooze = await startWith(`
models:
  m: { command: ${simCommand(["--enable-sleep-mode", "--load-time", "800ms"], 1)} }
`);
    const url = snooze.url;
    const held = fetch(`${url}/v1/chat/completions`, { ...chat("m"), signal: AbortSignal.timeout(20_000) });
    await until(async () => (await tierOf(url)) === "starting", 10_000, "the start");
    const asked = await fetch(`${url}/snooze/v1/models/m/${verb}`, {
      method: "POST",
      signal: AbortSignal.timeout(20_000),
    });
    const answer = await held;
    expect(answer.status, await answer.text()).toBe(200);
    expect(asked.status).toBe(200);
    expect(await asked.json()).toMatchObject({ model: "m", action: verb, tier: after });
    expect(await tierOf(url)).toBe(after);
  });
}

/** `snooze sleep m`, as a person runs it: its exit code and what it printed. */
function cliSleep(url: string, started?: (child: ReturnType<typeof spawn>) => void) {
  const child = spawn(process.execPath, ["bin/snooze.js", "sleep", "m", "--url", url], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  started?.(child);
  const timer = setTimeout(() => child.kill("SIGKILL"), 20_000);
  return new Promise<{ code: number | null; output: string }>((resolve) =>
    child.once("close", (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    }),
  );
}

/** `m` with a 4 s stream (40 tokens, 100 ms apart) running on it, and the given drainTimeout. */
async function streaming(drainTimeout: string) {
  snooze = await startWith(`
models:
  m:
    command: ${simCommand(["--enable-sleep-mode", "--itl", "100ms"], 1)}
    drainTimeout: ${drainTimeout}
`);
  const stream = await fetch(`${snooze.url}/v1/chat/completions`, {
    ...chat("m", { stream: true, max_tokens: 40, ignore_eos: true }),
    signal: AbortSignal.timeout(20_000),
  });
  return { url: snooze.url, stream };
}

for (const how of ["the admin API", "snooze sleep"] as const) {
  test(`a sleep overtaken by a request that arrives after it was asked ends at once, through ${how}: 504 action_unfinished, exit 1`, async () => {
    // A stream keeps the drain waiting (its drainTimeout is 30 s): the sleep is under way, not done.
    const { url, stream } = await streaming("30s");
    const asked =
      how === "snooze sleep"
        ? cliSleep(url)
        : fetch(`${url}/snooze/v1/models/m/sleep`, { method: "POST", signal: AbortSignal.timeout(20_000) });
    await until(async () => (await tierOf(url)) === "draining", 10_000, "the drain");
    const next = await fetch(`${url}/v1/chat/completions`, chat("m", { max_tokens: 1 }));
    expect(next.status).toBe(200);
    // Before, the call waited out start/wake timeout + drainTimeout + 1 min: past the 20 s above.
    const answer = await asked;
    if (answer instanceof Response) {
      expect(answer.status).toBe(504);
      expect(((await answer.json()) as any).error).toMatchObject({ code: "action_unfinished" });
    } else {
      expect(answer.code, answer.output).toBe(1);
      expect(answer.output).toContain(
        "answered 504: The sleep of m was taken back: a request (or a wake) came for it after it was asked, so the model stays awake",
      );
    }
    expect(await stream.text()).toContain("[DONE]");
    expect(await tierOf(url)).toBe("ready");
  });
}

test("Ctrl-C during `snooze sleep` ends the wait, not the sleep: it says the sleep goes on, exit 130, and the model sleeps", async () => {
  const { url, stream } = await streaming("1s");
  let child: ReturnType<typeof spawn> | undefined;
  const asked = cliSleep(url, (started) => (child = started));
  await until(async () => (await tierOf(url)) === "draining", 10_000, "the drain");
  child!.kill("SIGINT");
  const { code, output } = await asked;
  expect(code).toBe(130);
  expect(output).toContain("snooze sleep: no longer waiting; the sleep of m goes on in Snooze");
  expect(await stream.text()).toContain('"code":"drain_timeout"');
  await until(async () => (await tierOf(url)) === "asleep-1", 10_000, "the sleep");
});

for (const how of ["the admin API", "snooze sleep"] as const) {
  test(`a sleep the engine fails: the engine is stopped instead, and ${how} says so (502 action_failed, exit 1)`, async () => {
    // Found by an outside tester: the call answered 200 "cold" and the CLI exited 0.
    snooze = await startWith(`
models:
  m: { command: ${simCommand(["--enable-sleep-mode"])} }
`);
    const url = snooze.url;
    expect((await fetch(`${url}/v1/chat/completions`, chat("m"))).status).toBe(200);
    const address = snooze.autoscaler.controller("m")!.state().address!;
    const fault = await fetch(`http://${address}/sim/faults`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ sleepFail: 1 }),
    });
    expect(fault.ok).toBe(true);
    const expected = "The sleep of m failed (POST /sleep?level=1&mode=wait answered 500";
    const answer =
      how === "snooze sleep"
        ? await cliSleep(url)
        : await fetch(`${url}/snooze/v1/models/m/sleep`, {
            method: "POST",
            signal: AbortSignal.timeout(20_000),
          });
    if (answer instanceof Response) {
      expect(answer.status).toBe(502);
      const { error } = (await answer.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("action_failed");
      expect(error.message).toContain(expected);
      expect(error.message).toContain("its engine was stopped instead");
    } else {
      expect(answer.code, answer.output).toBe(1);
      expect(answer.output).toContain(`answered 502: ${expected}`);
    }
    expect(await tierOf(url)).toBe("cold");
    // The next request starts it again.
    expect((await fetch(`${url}/v1/chat/completions`, chat("m"))).status).toBe(200);
  });
}

test("a sleep still under way when Snooze shuts down is answered 503 shutting_down, not cut", async () => {
  // Found by an outside tester: `snooze sleep` said it could not reach Snooze ("other side closed").
  snooze = await startWith(`
models:
  m: { command: ${simCommand(["--enable-sleep-mode", "--load-time", "100ms", "--sleep-time-l1", "10s"], 1)} }
`);
  const url = snooze.url;
  expect((await fetch(`${url}/v1/chat/completions`, chat("m"))).status).toBe(200);
  const asked = fetch(`${url}/snooze/v1/models/m/sleep`, {
    method: "POST",
    signal: AbortSignal.timeout(20_000),
  });
  await until(async () => (await tierOf(url)) === "draining", 5_000, "the sleep");
  const closing = snooze.close(1_000);
  snooze = undefined;
  const answer = await asked;
  expect(answer.status).toBe(503);
  expect(answer.headers.get("retry-after")).toBe("5");
  expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
  await closing;
});

for (const verb of ["sleep", "stop"] as const) {
  test(`a ${verb} waiting for a drain when a reload removes the model: 404 model_not_found saying so, not a 500`, async () => {
    // Found by a probe: the answer read the tier of the model's route, gone with the model.
    const { url, stream } = await streaming("30s");
    const asked = fetch(`${url}/snooze/v1/models/m/${verb}`, {
      method: "POST",
      signal: AbortSignal.timeout(20_000),
    });
    await until(async () => (await tierOf(url)) === "draining", 10_000, "the drain");
    const other = `models:\n  other: { command: ${simCommand([], 1)} }\n`;
    expect(snooze!.models!.apply(parseConfig(other, "test.yaml")).result).toBe("applied");
    expect(await stream.text()).toContain("[DONE]");
    const answer = await asked;
    expect(answer.status).toBe(404);
    expect(((await answer.json()) as { error: unknown }).error).toMatchObject({
      code: "model_not_found",
      param: "model",
      message: `The model \`m\` was taken out of the settings (a reload removed or renamed it) while its ${verb} was under way; the removal stops its engine. Known models: \`other\`.`,
    });
  });
}

test("a wake asked during the shutdown, by the admin API or an event, is answered 503 shutting_down and starts no engine", async () => {
  // Found by a probe: it was answered 202 and started an engine, stopped again with the rest.
  snooze = await startWith(`
models:
  m: { command: ${simCommand(["--itl", "100ms"], 1)} }
  other: { command: ${simCommand(["--load-time", "100ms"], 1)} }
`);
  const url = snooze.url;
  const stream = await fetch(`${url}/v1/chat/completions`, {
    ...chat("m", { stream: true, max_tokens: 30, ignore_eos: true }),
    signal: AbortSignal.timeout(20_000),
  });
  const closing = snooze.close(10_000);
  const platform = snooze.platform;
  snooze = undefined;
  const wake = await fetch(`${url}/snooze/v1/models/other/wake`, { method: "POST" });
  expect(wake.status).toBe(503);
  expect(wake.headers.get("retry-after")).toBe("5");
  expect(((await wake.json()) as { error: { code: string } }).error.code).toBe("shutting_down");
  const event = await fetch(`${url}/snooze/v1/events`, {
    method: "POST",
    headers: {
      "ce-specversion": "1.0",
      "ce-id": "1",
      "ce-source": "/test",
      "ce-type": "dev.snooze.model.wake",
      "ce-subject": "other",
    },
  });
  expect(event.status).toBe(503);
  expect(await stream.text()).toContain("[DONE]");
  // Seconds after the wake, while the shutdown waits for the stream: no engine for it (one loads in 100 ms).
  expect(platform.replicaSet("other")?.replicas ?? []).toEqual([]);
  await closing;
});
