import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * An engine run with vLLM's `--api-key`: its `/v1` routes want `Authorization: Bearer <key>`, which
 * clients send and Snooze passes on; its sleep API, `/health` and `/metrics` want nothing.
 */
let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`
models:
  keyed:
    command: ${simCommand(["--enable-sleep-mode", "--api-key", "sekrit"])}
`);
});
afterAll(() => snooze.close(1_000));

const withKey = (key?: string) => {
  const init = chat("keyed");
  return { ...init, headers: { ...init.headers, ...(key ? { authorization: `Bearer ${key}` } : {}) } };
};
const tier = async () =>
  ((await (await fetch(`${snooze.url}/v1/models/keyed`)).json()) as { snooze: { tier: string } }).snooze.tier;

test("a model whose engine wants an API key starts and wakes for a request with the key, routed without its warm-up", async () => {
  // Found by an outside tester: the warm-up, sent without a key, was answered 401 and taken for a
  // failed start: the engine was stopped and every request got 503 activation_failed.
  const first = await fetch(`${snooze.url}/v1/chat/completions`, withKey("sekrit"));
  expect(first.status).toBe(200);
  expect(((await first.json()) as { object: string }).object).toBe("chat.completion");
  // The engine's own answer to a client without the key is passed on.
  const refused = await fetch(`${snooze.url}/v1/chat/completions`, withKey());
  expect(refused.status).toBe(401);
  await refused.body?.cancel();
  // Asleep, then woken by the next request: the wake's warm-up is refused too, and is skipped.
  const slept = await fetch(`${snooze.url}/snooze/v1/models/keyed/sleep`, { method: "POST" });
  expect(slept.status).toBe(200);
  await until(async () => (await tier()) === "asleep-1", 10_000, "keyed asleep");
  const woken = await fetch(`${snooze.url}/v1/chat/completions`, withKey("sekrit"));
  expect(woken.status).toBe(200);
  await woken.body?.cancel();
  expect(await tier()).toBe("ready");
});
