import { describe, expect, test } from "vitest";
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import { Timeline, type TimelineMessage } from "./timeline.ts";

const t0 = Date.parse("2026-01-01T00:00:00Z");

function setup() {
  let now = t0;
  const timeline = new Timeline({ now: () => now });
  const heard: TimelineMessage[] = [];
  timeline.subscribe((message) => heard.push(message));
  const at = (seconds: number) => {
    now = t0 + seconds * 1000;
  };
  const event = (seconds: number, tier: Tier, extra: Partial<ReplicaEvent> = {}) => {
    at(seconds);
    timeline.observe({
      model: "qwen",
      replica: "qwen-1",
      ...(tier !== "cold" ? { address: "127.0.0.1:9000" } : {}),
      tier,
      since: now,
      ...extra,
    });
  };
  return { timeline, heard, at, event };
}

const summary = (timeline: Timeline) =>
  timeline.entries().map((e) => `${e.kind} ${e.durationMs ?? "-"} ${e.from ?? ""}→${e.to ?? ""}`);

describe("the timeline", () => {
  test("lists a cold start, a sleep, a wake, a deeper sleep and a stop with their durations", () => {
    const { timeline, event } = setup();
    event(10, "starting");
    event(14, "ready");
    event(50, "draining");
    event(51, "asleep-1");
    event(60, "waking");
    event(60.8, "ready");
    event(90, "draining");
    event(90.5, "asleep-1");
    event(200, "asleep-2");
    event(700, "cold");
    expect(summary(timeline)).toEqual([
      "start 4000 cold→ready",
      "sleep 1000 draining→asleep-1",
      "wake 800 asleep-1→ready",
      "sleep 500 draining→asleep-1",
      "deepen - asleep-1→asleep-2",
      "stop - asleep-2→cold",
    ]);
    expect(timeline.entries()[0]).toMatchObject({
      model: "qwen",
      replica: "qwen-1",
      at: "2026-01-01T00:00:14.000Z",
      startedAt: "2026-01-01T00:00:10.000Z",
    });
  });

  test("a start stays a start when the replica shows waking before ready (a pod not Ready yet)", () => {
    const { timeline, event } = setup();
    event(10, "starting");
    event(12, "waking");
    event(13, "ready");
    expect(summary(timeline)).toEqual(["start 3000 cold→ready"]);
  });

  test("a failed activation is one failure with its reason; a placeholder event is no replica", () => {
    const { timeline, event } = setup();
    event(10, "starting");
    // Failed in place: the event keeps the tier's own `since` (found by an outside tester: 0 ms).
    event(13, "starting", { error: "start of qwen failed: engine exited (code 1)", since: t0 + 10_000 });
    event(13.1, "cold");
    // A swap's announcement names no real replica.
    event(20, "cold", { replica: "qwen/activation" });
    expect(summary(timeline)).toEqual(["failure 3000 cold→starting"]);
    expect(timeline.entries()[0]!.message).toBe("start of qwen failed: engine exited (code 1)");
    expect(timeline.replica("qwen", "qwen/activation")).toBeUndefined();
    expect(timeline.usage("qwen").awakeSeconds).toBe(3.1);
  });

  test("news of the model (a start waiting for its pod, a failure before any pod) is no replica: no entries, no awake time", () => {
    const { timeline, event } = setup();
    const news = { replica: "qwen/activation", address: undefined, modelNews: true } as const;
    event(10, "starting", news);
    event(70, "starting", { ...news, error: "start of qwen failed: the pod was never made" });
    event(71, "cold", news);
    expect(summary(timeline)).toEqual(["failure - →starting"]);
    expect(timeline.entries()[0]).not.toHaveProperty("replica");
    expect(timeline.replica("qwen", "qwen/activation")).toBeUndefined();
    expect(timeline.usage("qwen").awakeSeconds).toBe(0);
  });

  test("a start stopped on purpose (a person's stop, no error) is a stop, not a failure", () => {
    // Found by an outside tester: it was listed as the failure "start ended (cold)".
    const { timeline, event } = setup();
    event(10, "starting");
    event(12, "cold");
    expect(summary(timeline)).toEqual(["stop 2000 starting→cold"]);
    expect(timeline.entries()[0]!.message).toBeUndefined();
  });

  test("GPU time of a model added by a reload counts from when it was added, not from the start", () => {
    // Found by an outside tester: the page credited a model added 106 s in with savings from before.
    let now = t0;
    const timeline = new Timeline({
      now: () => now,
      addedAt: (m) => (m === "late" ? t0 + 40_000 : undefined),
    });
    now = t0 + 100_000;
    expect(timeline.usage("late")).toMatchObject({ elapsedSeconds: 60, savedSeconds: 60 });
    expect(timeline.usage("early")).toMatchObject({ elapsedSeconds: 100, savedSeconds: 100 });
  });

  test("a model removed and added again by reloads counts its GPU time afresh from the second add", () => {
    // Found by an outside tester: 66 s awake before the removal were set against 21 s since the add.
    let now = t0;
    let addedAt = t0 - 1;
    const timeline = new Timeline({ now: () => now, addedAt: () => addedAt });
    const event = (seconds: number, tier: Tier) => {
      now = t0 + seconds * 1000;
      timeline.observe({ model: "qwen", replica: "qwen-1", address: "127.0.0.1:9", tier, since: now });
    };
    event(0, "starting");
    event(66, "cold");
    addedAt = t0 + 70_000; // removed, then added again
    now = t0 + 91_000;
    expect(timeline.usage("qwen")).toMatchObject({ awakeSeconds: 0, elapsedSeconds: 21, savedSeconds: 21 });
  });

  test("GPU time: awake against always-on since the start, per model; segments of tiers", () => {
    const { timeline, event, at } = setup();
    event(10, "starting");
    event(12, "ready");
    event(40, "draining");
    event(41, "asleep-1");
    at(100);
    expect(timeline.usage("qwen")).toEqual({
      awakeSeconds: 31,
      elapsedSeconds: 100,
      savedSeconds: 69,
      baselineReplicas: 1,
    });
    expect(timeline.usage("llama")).toMatchObject({ awakeSeconds: 0, savedSeconds: 100 });
    expect(timeline.segments("qwen").map((s) => [s.tier, (s.from - t0) / 1000])).toEqual([
      ["cold", 0],
      ["starting", 10],
      ["ready", 12],
      ["draining", 40],
      ["asleep-1", 41],
    ]);
    expect(timeline.segments("llama")).toEqual([{ tier: "cold", from: t0 }]);
  });

  test("replicas that run before it starts (an activator joining on Kubernetes) count from its start", () => {
    const { timeline, at } = setup();
    timeline.observe({
      model: "qwen",
      replica: "pod-a",
      address: "10.0.0.1:8000",
      tier: "ready",
      since: t0 - 60_000,
    });
    timeline.observe({
      model: "qwen",
      replica: "pod-b",
      address: "10.0.0.2:8000",
      tier: "ready",
      since: t0 - 30_000,
    });
    at(10);
    expect(timeline.usage("qwen")).toEqual({
      awakeSeconds: 20,
      elapsedSeconds: 10,
      savedSeconds: 0,
      baselineReplicas: 2,
    });
    expect(timeline.entries()).toEqual([]);
    expect(timeline.segments("qwen")).toEqual([{ tier: "ready", from: t0 }]);
  });

  test("swaps come from the slots' status, once each; subscribers hear events and entries", () => {
    const { timeline, heard, event } = setup();
    event(5, "waking");
    const swap = { from: "llama", to: "qwen", at: "2026-01-01T00:00:06.000Z", durationMs: 2_500 };
    const slot = {
      name: "gpu0",
      policy: "sticky",
      members: ["llama", "qwen"],
      waiting: [],
      swaps: 1,
      maxResidents: 1,
    };
    timeline.noteSlots([{ ...slot, lastSwap: swap }]);
    timeline.noteSlots([{ ...slot, lastSwap: swap }]);
    expect(timeline.entries().filter((e) => e.kind === "swap")).toEqual([
      expect.objectContaining({
        model: "qwen",
        swappedOut: "llama",
        slot: "gpu0",
        durationMs: 2_500,
        startedAt: "2026-01-01T00:00:03.500Z",
      }),
    ]);
    expect(heard.map((m) => m.type)).toEqual(["tier", "entry"]);
  });

  test("keeps one hour", () => {
    const { timeline, event, at } = setup();
    event(10, "starting");
    event(12, "ready");
    at(3_700);
    expect(timeline.entries()).toEqual([]);
  });

  test("a model no longer listed keeps no history once its last replica is gone (found by a probe: one ledger per model ever served)", () => {
    let now = t0;
    const listed = new Set(["qwen", "llama"]);
    const timeline = new Timeline({ now: () => now, listed: (model) => listed.has(model) });
    const event = (model: string, seconds: number, tier: Tier) => {
      now = t0 + seconds * 1000;
      timeline.observe({ model, replica: `${model}-1`, tier, since: now });
    };
    const fresh = [{ tier: "cold", from: t0 }];
    for (const model of ["qwen", "llama"]) {
      event(model, 1, "starting");
      event(model, 2, "ready");
    }
    event("qwen", 3, "cold");
    expect(timeline.segments("qwen")).not.toEqual(fresh);

    // Removed while cold: gone with the list's change.
    listed.delete("qwen");
    timeline.modelsChanged();
    expect(timeline.segments("qwen")).toEqual(fresh);
    expect(timeline.usage("qwen").awakeSeconds).toBe(0);

    // Removed while it runs: kept while its engine serves what it held, gone once it stops.
    listed.delete("llama");
    timeline.modelsChanged();
    expect(timeline.segments("llama")).not.toEqual(fresh);
    event("llama", 4, "cold");
    expect(timeline.segments("llama")).toEqual(fresh);
    // The stops stay in the last hour's entries, as everything that happened does.
    expect(timeline.entries().filter((e) => e.kind === "stop")).toHaveLength(2);
  });

  test("a slot no longer reported keeps no record of its last swap", () => {
    const timeline = new Timeline({ now: () => t0 + 10_000 });
    const slot = (name: string) => ({
      name,
      policy: "sticky",
      members: ["llama", "qwen"],
      waiting: [],
      swaps: 1,
      maxResidents: 1,
      lastSwap: { from: "llama", to: "qwen", at: "2026-01-01T00:00:06.000Z", durationMs: 2_500 },
    });
    const seen = () => (timeline as unknown as { swapsSeen: Map<string, string> }).swapsSeen.size;
    for (let round = 0; round < 10; round++) timeline.noteSlots([slot("gpu0"), slot(`gone${round}`)]);
    expect(seen()).toBe(2);
  });
});
