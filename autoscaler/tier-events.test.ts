import { expect, test } from "vitest";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { cloudEventFor, swapCloudEvent, TierEvents } from "./tier-events.ts";

const event = (patch: Partial<ReplicaEvent>): ReplicaEvent => ({
  model: "qwen",
  replica: "qwen-1",
  tier: "ready",
  since: 0,
  ...patch,
});

test.each([
  ["waking", event({}), "dev.snooze.replica.woke"],
  ["starting", event({}), "dev.snooze.replica.started"],
  ["draining", event({ tier: "asleep-1" }), "dev.snooze.replica.slept"],
  ["asleep-1", event({ tier: "asleep-2" }), "dev.snooze.replica.slept"],
  ["asleep-2", event({ tier: "cold" }), "dev.snooze.replica.stopped"],
  ["waking", event({ tier: "asleep-1", error: "wake failed" }), "dev.snooze.activation.failed"],
] as const)("%s → %s", (from, to, type) => {
  expect(cloudEventFor(from, to)?.type).toBe(type);
});

test("changes that are not news send nothing", () => {
  expect(cloudEventFor("ready", event({ tier: "draining" }))).toBeUndefined();
  expect(cloudEventFor("cold", event({ tier: "starting" }))).toBeUndefined();
  expect(cloudEventFor("ready", event({}))).toBeUndefined();
});

test("each event says how long the replica was in the tier it left; a tier told again does not restart it", () => {
  const events = new TierEvents();
  events.next(event({ tier: "waking", since: 1_000, traceparent: "00-a-b-01" }));
  events.next(event({ tier: "waking", since: 1_400, traceparent: "00-a-c-01" }));
  const woke = events.next(event({ tier: "ready", since: 2_250 }));
  expect(woke).toMatchObject({
    type: "dev.snooze.replica.woke",
    data: { from: "waking", durationMs: 1_250 },
  });
  expect(woke?.traceparent).toBe("00-a-c-01");
  // A replica first seen in a tier: no duration to tell.
  expect(
    events.next(event({ replica: "qwen-2", tier: "asleep-1", since: 5 }))?.data.durationMs,
  ).toBeUndefined();
});

test("a start that failed while starting: its activation.failed says how long it had been starting (was 0)", () => {
  let now = 0;
  const events = new TierEvents(() => now);
  events.next(event({ tier: "starting", since: 1_000 }));
  now = 3_020;
  const failed = events.next(event({ tier: "starting", since: 1_000, error: "start of qwen failed: boom" }));
  expect(failed).toMatchObject({
    type: "dev.snooze.activation.failed",
    data: { from: "starting", to: "starting", reason: "start of qwen failed: boom", durationMs: 2_020 },
  });
});

test("a swap's event: type dev.snooze.slot.swapped, the slot as subject, the swap span's traceparent as extension", () => {
  expect(
    swapCloudEvent({
      slot: "gpu0",
      from: "a",
      to: "b",
      reason: "fifo",
      durationMs: 812,
      traceparent: "00-x-y-01",
    }),
  ).toEqual({
    type: "dev.snooze.slot.swapped",
    subject: "gpu0",
    data: { slot: "gpu0", from: "a", to: "b", reason: "fifo", durationMs: 812 },
    traceparent: "00-x-y-01",
  });
});

test("the activation's tracestate goes with its traceparent, to the event that ends it and to a swap's (found by an outside tester)", () => {
  const events = new TierEvents();
  events.next(event({ tier: "waking", since: 1_000, traceparent: "00-a-b-01", tracestate: "rojo=1" }));
  expect(events.next(event({ tier: "ready", since: 2_000 }))).toMatchObject({
    traceparent: "00-a-b-01",
    tracestate: "rojo=1",
  });
  // A sleep is no activation: neither.
  const slept = events.next(event({ tier: "asleep-1", since: 3_000 }));
  expect(slept?.traceparent).toBeUndefined();
  expect(slept?.tracestate).toBeUndefined();
  expect(
    swapCloudEvent({
      slot: "gpu0",
      from: "a",
      to: "b",
      reason: "fifo",
      durationMs: 1,
      traceparent: "00-x-y-01",
      tracestate: "congo=2",
    }),
  ).toMatchObject({ traceparent: "00-x-y-01", tracestate: "congo=2", data: { durationMs: 1 } });
});
