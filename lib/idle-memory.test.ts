import { describe, expect, test } from "vitest";
import { ManualClock } from "../test/support/manual-clock.ts";
import {
  growthBytes,
  type IdleSample,
  idleCheckMs,
  releaseMemoryWhenIdle,
  shouldCollect,
} from "./idle-memory.ts";

const MiB = 2 ** 20;

describe("releasing memory when idle", () => {
  test("collects only after an idle minute in which the resident set grew by a MiB", () => {
    expect(shouldCollect({ utilization: 0.001, rss: 81 * MiB }, 80 * MiB)).toBe(true);
    expect(shouldCollect({ utilization: 0.001, rss: 80 * MiB + growthBytes - 1 }, 80 * MiB)).toBe(false);
    expect(shouldCollect({ utilization: 0.3, rss: 90 * MiB }, 80 * MiB)).toBe(false);
  });

  test("samples once a minute, collects when due, and measures growth from after the collection", () => {
    const clock = new ManualClock();
    const samples: IdleSample[] = [
      { utilization: 0, rss: 80 * MiB }, // at start: the baseline
      { utilization: 0.001, rss: 80.5 * MiB }, // grown too little
      { utilization: 0.5, rss: 83 * MiB }, // busy
      { utilization: 0.001, rss: 83 * MiB }, // idle and grown: collect, back to 79.5
      { utilization: 0.001, rss: 80 * MiB }, // grown 0.5 from 79.5: not yet
      { utilization: 0.001, rss: 80.6 * MiB }, // 1.1 MiB above 79.5: collect
    ];
    const collected: number[] = [];
    const watcher = releaseMemoryWhenIdle({
      clock,
      sample: () => samples.shift()!,
      collect: () => {
        collected.push(clock.now());
        return 79.5 * MiB;
      },
    });
    const start = clock.now();
    clock.advance(idleCheckMs * 5);
    expect(collected).toEqual([start + 3 * idleCheckMs, start + 5 * idleCheckMs]);
    watcher.stop();
    clock.advance(idleCheckMs * 5);
    expect(samples).toEqual([]);
    expect(collected).toHaveLength(2);
  });
});
