import { afterEach, expect, test } from "vitest";
import { isResident } from "../../autoscaler/slot-arbiter.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import type { Tier } from "../../lib/replica-event.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * A reload that moves models into a slot while their engines are awake (found by a probe: `b`,
 * moved into `gpu0` beside `a`, was started there while `a`'s engine, moving in too, still drained
 * a stream on the accelerator they now share: two engines on one GPU, which a real one would not hold).
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const command = simCommand(["--enable-sleep-mode", "--itl", "100ms"], 0.05);
const model = (name: string, slot?: string) =>
  `  ${name}:\n    command: ${command}\n${slot ? `    slot: ${slot}\n` : ""}`;
const settings = (slot?: string) =>
  `slots:\n  gpu0: { minResidency: 0s, swapCooldown: 0s }\nmodels:\n${model("a", slot)}${model("b", slot)}${model("c", "gpu0")}`;

async function ask(name: string, extra: Record<string, unknown> = {}) {
  const answer = await fetch(`${snooze!.url}/v1/chat/completions`, chat(name, extra));
  return { status: answer.status, text: await answer.text() };
}

/** Each start or wake, with the models that held an awake engine (resident) when it began. */
function watchActivations() {
  const tiers = new Map<string, Tier>();
  const beside: string[] = [];
  snooze!.autoscaler.watch((event) => {
    if (event.tier === "starting" || event.tier === "waking") {
      const others = [...tiers].filter(([m, tier]) => m !== event.model && isResident(tier)).map(([m]) => m);
      if (others.length > 0) beside.push(`${event.model} ${event.tier} beside ${others.join(", ")}`);
    }
    tiers.set(event.model, event.tier);
  });
  return beside;
}

test("two awake models moved into one slot: neither starts there while the other's engine still drains on it", async () => {
  snooze = await startWith(settings());
  expect((await ask("a")).status).toBe(200);
  expect((await ask("b")).status).toBe(200);
  const beside = watchActivations();
  // a streams for about 2 s (40 tokens, 50 ms each) through the reload: its engine drains that long.
  const streaming = ask("a", { stream: true, max_tokens: 40 });
  await until(() => snooze!.activator.routes.get("a")!.inFlight === 1, 5_000, "a's stream");

  expect(snooze.models!.apply(parseConfig(settings("gpu0"), "test.yaml")).result).toBe("applied");
  // b's engine, idle, is gone at once; its request is held for the slot meanwhile, as are c's.
  const [b, c] = await Promise.all([ask("b"), ask("c")]);
  const stream = await streaming;

  expect(stream.status).toBe(200);
  expect(stream.text).toContain("[DONE]");
  expect(b.status, b.text).toBe(200);
  expect(c.status, c.text).toBe(200);
  expect(beside).toEqual([]);
  await snooze.models!.settled();
  const slot = (await snooze.autoscaler.slotStatuses()).find((s) => s.name === "gpu0")!;
  expect(slot.members).toEqual(["a", "b", "c"]);
  expect(slot.maxResidents).toBe(1);
});
