import { describe, expect, test } from "vitest";
import { Harness } from "../test/support/autoscaler-harness.ts";

// A tier is told to the activators by writing it on the platform (on Kubernetes: the pod's
// snooze.dev/tier annotation, which every activator watches). A write the platform refuses (the
// API server throttling with 429, a 500, a moment it cannot be reached) must be made again: the
// controller's own belief moved on, and activators that read the old tier route by it.

const yaml = `
defaults:
  sleepAfter: 1m
  drainTimeout: 30s
models:
  m:
    command: [engine, "\${PORT}"]
`;

async function asleep() {
  const h = new Harness(yaml, { keepRecordedTiers: true });
  const id = await h.serveCold("m");
  await h.advance(61_000);
  expect(h.controller("m").tier).toBe("asleep-1");
  h.mark();
  return { h, id };
}

const recorded = (h: Harness, id: string) =>
  h.platform.tierRecords.filter((r) => r.replica === id).map((r) => r.tier);

describe("a tier write the platform refuses", () => {
  test("the ready after a wake is written again: activators that hold its requests see it ready", async () => {
    // Before: the wake's `ready` was refused once and never written again. The pod said `waking`
    // for good, activators held every request for it until its hold budget ran out, and the
    // controller, believing it ready, did nothing more.
    const { h, id } = await asleep();
    h.platform.refuseTierWrites.push("ready");
    h.demand("m");
    h.stats("m", 0, 1);
    await h.settle();
    expect(h.platform.calls).toContain(`record ${id} ready refused`);
    await h.advance(10_000, () => h.stats("m", 0, 1));
    expect(recorded(h, id).at(-1)).toBe("ready");
    expect(h.platform.replica(id)!.recorded?.tier).toBe("ready");
  });

  test("the asleep after a sleep is written again", async () => {
    const h = new Harness(yaml, { keepRecordedTiers: true });
    const id = await h.serveCold("m");
    h.mark();
    h.platform.refuseTierWrites.push("asleep-1");
    await h.advance(61_000);
    expect(h.platform.calls).toContain(`record ${id} asleep-1 refused`);
    await h.advance(10_000);
    expect(h.controller("m").tier).toBe("asleep-1");
    expect(recorded(h, id).at(-1)).toBe("asleep-1");
  });
});
