import { spawn } from "node:child_process";
import { afterEach, expect, test } from "vitest";
import type { AdminModelView } from "../../activator/admin.ts";
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

const command = simCommand(["--enable-sleep-mode", "--itl", "1s"], 0.05);
const model = (name: string, slot?: string) =>
  `  ${name}:\n    command: ${command}\n${slot ? `    slot: ${slot}\n` : ""}`;
const settings = (slotOfA?: string, slotOfB = slotOfA) =>
  `slots:\n  gpu0: { minResidency: 0s, swapCooldown: 0s }\nmodels:\n${model("a", slotOfA)}${model("b", slotOfB)}${model("c", "gpu0")}`;

/** `snooze <args>` as a real process against this Snooze: its exit code and what it printed. */
async function run(args: string[]) {
  const child = spawn(process.execPath, ["bin/snooze.js", ...args, "--url", snooze!.url], {
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const code = await new Promise<number | null>((resolve) => child.once("close", resolve));
  return { code, output };
}

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
  // a streams for about 3 s (60 tokens, 50 ms each) through the reload: its engine drains that long.
  const streaming = ask("a", { stream: true, max_tokens: 60 });
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

test("snooze wake while a reload moves the model out of its slot: the model wakes once moved (before: the wake was lost, 'cold again')", async () => {
  snooze = await startWith(settings("gpu0"));
  expect((await ask("a")).status).toBe(200);
  const streaming = ask("a", { stream: true, max_tokens: 60 });
  await until(() => snooze!.activator.routes.get("a")!.inFlight === 1, 5_000, "a's stream");
  // a leaves gpu0: its engine drains the stream first, and the wake is asked meanwhile.
  expect(snooze.models!.apply(parseConfig(settings(undefined, "gpu0"), "test.yaml")).result).toBe("applied");
  const wake = await run(["wake", "a", "--timeout", "20s"]);

  expect((await streaming).text).toContain("[DONE]");
  expect(wake.output).toMatch(/a: ready after/);
  expect(wake.code, wake.output).toBe(0);
  expect(snooze.autoscaler.controller("a")!.tier).toBe("ready");
  expect(snooze.autoscaler.controller("a")!.config.slot).toBeUndefined();
});

test("the shutdown during a move: the engine it stops is not taken up again as starting (before: a tier line cold → starting)", async () => {
  snooze = await startWith(settings("gpu0"));
  expect((await ask("a")).status).toBe(200);
  const streaming = ask("a", { stream: true, max_tokens: 60 });
  await until(() => snooze!.activator.routes.get("a")!.inFlight === 1, 5_000, "a's stream");
  expect(snooze.models!.apply(parseConfig(settings(undefined, "gpu0"), "test.yaml")).result).toBe("applied");
  const closing = snooze.close(200);
  const tiers: string[] = [];
  snooze.autoscaler.watch((event) => tiers.push(event.tier));
  await closing;
  await streaming;
  await snooze.models!.settled();
  expect(tiers).not.toContain("starting");
  expect(tiers.at(-1)).toBe("cold");
  snooze = undefined;
});

test("a model moved to another slot keeps what it measured and learned: its last start, its GPU time", async () => {
  snooze = await startWith(settings("gpu0"));
  expect((await ask("a")).status).toBe(200);
  const before = snooze.autoscaler.controller("a")!.state();
  expect(before.lastStartMs).toBeGreaterThan(0);
  const awake = before.learning!.gpuSeconds.awake;

  expect(snooze.models!.apply(parseConfig(settings(undefined, "gpu0"), "test.yaml")).result).toBe("applied");
  await snooze.models!.settled();
  const view = async () =>
    (
      (await (await fetch(`${snooze!.url}/snooze/v1/models`)).json()) as { models: AdminModelView[] }
    ).models.find((m) => m.id === "a")!;
  const moved = await view();
  expect(moved.slot).toBeUndefined();
  expect(moved.lastStartMs).toBe(before.lastStartMs);
  expect(moved.learning!.gpuSeconds.awake).toBeGreaterThanOrEqual(awake);
});

test("a prewarm event while a reload moves the model out of its slot: the model is warm once moved", async () => {
  snooze = await startWith(settings("gpu0"));
  expect((await ask("a")).status).toBe(200);
  const streaming = ask("a", { stream: true, max_tokens: 60 });
  await until(() => snooze!.activator.routes.get("a")!.inFlight === 1, 5_000, "a's stream");
  expect(snooze.models!.apply(parseConfig(settings(undefined, "gpu0"), "test.yaml")).result).toBe("applied");
  const event = await fetch(`${snooze.url}/snooze/v1/events`, {
    method: "POST",
    headers: { "content-type": "application/cloudevents+json" },
    body: JSON.stringify({
      specversion: "1.0",
      id: "warm-a",
      source: "/test",
      type: "dev.snooze.model.prewarm",
      subject: "a",
      data: { for: "10m" },
    }),
  });
  expect(event.status).toBeLessThan(300);

  expect((await streaming).text).toContain("[DONE]");
  await snooze.models!.settled();
  await until(() => snooze!.autoscaler.controller("a")!.tier === "ready", 10_000, "a warm again");
  expect(snooze.autoscaler.controller("a")!.config.slot).toBeUndefined();
});
