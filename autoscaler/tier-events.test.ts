import { expect, test } from "vitest";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { cloudEventFor } from "./tier-events.ts";

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
