import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { createLogger } from "../../lib/log.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * An engine run with vLLM's `--api-key`: its `/v1` routes want `Authorization: Bearer <key>`, which
 * clients send and Snooze passes on; its sleep API, `/health` and `/metrics` want nothing.
 */
let snooze: LocalSnooze;
const lines: string[] = [];
beforeAll(async () => {
  snooze = await startWith(
    `
models:
  keyed:
    command: ${simCommand(["--enable-sleep-mode", "--api-key", "sekrit"])}
  hidden:
    # The key where Snooze cannot read it (inside a shell's script): the warm-up goes without it.
    command: ["sh", "-c", 'exec "$@" --api-key "$0"', sekrit, ${simCommand(["--enable-sleep-mode"]).slice(1, -1)}]
  underscored:
    command: ${simCommand(["--enable-sleep-mode", "--api_key", "sekrit"])}
  shortened:
    command: ${simCommand(["--enable-sleep-mode", "--api-k=sekrit"])}
`,
    createLogger({}, (line) => lines.push(line), "warn"),
  );
});
afterAll(() => snooze.close(1_000));

const withKey = (key?: string, model = "keyed") => {
  const init = chat(model);
  return { ...init, headers: { ...init.headers, ...(key ? { authorization: `Bearer ${key}` } : {}) } };
};
const tier = async (model: string) =>
  ((await (await fetch(`${snooze.url}/v1/models/${model}`)).json()) as { snooze: { tier: string } }).snooze
    .tier;

test.each([
  ["keyed", "its key read from the command, the warm-up sent with it"],
  ["hidden", "its key out of Snooze's sight, the warm-up answered 401 and skipped"],
  ["underscored", "--api_key, as vLLM reads it, the warm-up sent with it"],
  ["shortened", "--api-k=, as vLLM reads it, the warm-up sent with it"],
])(
  "a model whose engine wants an API key (%s: %s) starts and wakes for requests with the key",
  async (model) => {
    // Found by an outside tester: the warm-up, sent without a key, was answered 401 and taken for a
    // failed start: the engine was stopped and every request got 503 activation_failed.
    const first = await fetch(`${snooze.url}/v1/chat/completions`, withKey("sekrit", model));
    expect(first.status).toBe(200);
    expect(((await first.json()) as { object: string }).object).toBe("chat.completion");
    // The engine's own answer to a client without the key is passed on.
    const refused = await fetch(`${snooze.url}/v1/chat/completions`, withKey(undefined, model));
    expect(refused.status).toBe(401);
    await refused.body?.cancel();
    // Asleep, then woken by the next request, its warm-up as the start's.
    const slept = await fetch(`${snooze.url}/snooze/v1/models/${model}/sleep`, { method: "POST" });
    expect(slept.status).toBe(200);
    await until(async () => (await tier(model)) === "asleep-1", 10_000, `${model} asleep`);
    const woken = await fetch(`${snooze.url}/v1/chat/completions`, withKey("sekrit", model));
    expect(woken.status).toBe(200);
    await woken.body?.cancel();
    expect(await tier(model)).toBe("ready");
    // Found by an outside tester: vLLM's other spellings of --api-key were not read, so their
    // engines were warmed without the key, answered 401 and routed cold.
    const skipped = lines.filter(
      (line) => line.includes("that Snooze does not send") && line.includes(`"${model}-`),
    );
    expect(skipped.length > 0, lines.join("\n")).toBe(model === "hidden");
  },
);
