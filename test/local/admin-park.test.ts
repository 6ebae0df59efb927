import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
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
