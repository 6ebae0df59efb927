import { expect, test } from "vitest";
import type { News } from "../tier-events.ts";
import { modelEventsFor } from "./model-events.ts";

const news = (type: string, data: Record<string, unknown>, models = ["team-a/qwen"]): News => ({
  type,
  subject: "qwen",
  data: { model: "qwen", replica: "qwen-7d9f-x2", ...data },
  models,
});

test.each([
  [
    news("dev.snooze.replica.started", { from: "starting", to: "ready", durationMs: 41_210 }),
    { type: "Normal", reason: "Started", action: "Start", note: "Replica qwen-7d9f-x2 started in 41.2s" },
  ],
  [
    news("dev.snooze.replica.woke", { from: "waking", to: "ready", durationMs: 1_830 }),
    { type: "Normal", reason: "Woke", action: "Wake", note: "Replica qwen-7d9f-x2 woke in 1.8s" },
  ],
  [
    news("dev.snooze.replica.slept", { from: "draining", to: "asleep-1", level: 1, durationMs: 620 }),
    {
      type: "Normal",
      reason: "Slept",
      action: "Sleep",
      note: "Replica qwen-7d9f-x2 slept at level 1 (drained and slept in 620ms)",
    },
  ],
  [
    news("dev.snooze.replica.slept", { from: "asleep-1", to: "asleep-2", level: 2, durationMs: 600_000 }),
    {
      reason: "Slept",
      note: "Replica qwen-7d9f-x2 slept at level 2 (went from asleep-1 in 10m)",
    },
  ],
  [
    news("dev.snooze.replica.stopped", { from: "asleep-2", to: "cold", durationMs: 3_600_000 }),
    {
      type: "Normal",
      reason: "Stopped",
      action: "Stop",
      note: "Replica qwen-7d9f-x2 stopped (was asleep-2 for 1h)",
    },
  ],
  [
    news("dev.snooze.activation.failed", {
      from: "waking",
      to: "asleep-1",
      reason: "the engine did not wake in 2m",
      durationMs: 120_000,
    }),
    {
      type: "Warning",
      reason: "Failed",
      action: "Wake",
      note: "Replica qwen-7d9f-x2 failed to wake after 2m: the engine did not wake in 2m",
    },
  ],
  [
    news("dev.snooze.activation.failed", { from: "starting", to: "cold", reason: "exit 1" }),
    {
      type: "Warning",
      reason: "Failed",
      action: "Start",
      note: "Replica qwen-7d9f-x2 failed to start: exit 1",
    },
  ],
])("%# %o", (input, expected) => {
  expect(modelEventsFor(input)).toEqual([expect.objectContaining({ model: "team-a/qwen", ...expected })]);
});

test("a replica seen first in the tier it left: no duration in the note", () => {
  expect(modelEventsFor(news("dev.snooze.replica.woke", { from: "waking", to: "ready" }))[0]?.note).toBe(
    "Replica qwen-7d9f-x2 woke",
  );
});

test("a swap is told on both Models: the target took the slot, the incumbent gave it", () => {
  const swap: News = {
    type: "dev.snooze.slot.swapped",
    subject: "gpu0",
    data: { slot: "gpu0", from: "llama", to: "qwen", reason: "waited longest", durationMs: 2_410 },
    models: ["team-a/qwen", "team-a/llama"],
  };
  expect(modelEventsFor(swap)).toEqual([
    {
      model: "team-a/qwen",
      type: "Normal",
      reason: "Swapped",
      action: "Swap",
      note: "Took slot gpu0 from llama in 2.4s (waited longest)",
    },
    {
      model: "team-a/llama",
      type: "Normal",
      reason: "Swapped",
      action: "Swap",
      note: "Gave slot gpu0 to qwen in 2.4s (waited longest)",
    },
  ]);
});

test("news that is no tier change or swap, or about no Model, records nothing", () => {
  expect(modelEventsFor(news("dev.snooze.something.else", {}))).toEqual([]);
  expect(modelEventsFor(news("dev.snooze.replica.woke", { from: "waking" }, []))).toEqual([]);
});
