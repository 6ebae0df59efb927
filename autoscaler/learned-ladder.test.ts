import { describe, expect, test } from "vitest";
import { gapBins } from "../lib/learning-snapshot.ts";
import { builtinTierDefaults } from "../lib/settings/index.ts";
import { gapBinOf, gapBinUpperMs } from "./arrival-history.ts";
import {
  chooseLadder,
  completeDurations,
  fixedPlanOf,
  planCost,
  referenceDurations,
} from "./learned-ladder.ts";

const minute = 60_000;

/** A histogram of idle gaps: `count` gaps of each length. */
function gaps(...entries: [gapMs: number, count: number][]): number[] {
  const histogram = new Array<number>(gapBins).fill(0);
  for (const [gap, count] of entries) histogram[gapBinOf(gap)]! += count;
  return histogram;
}

const settings = { ...builtinTierDefaults, wakeTarget: 3_000 };
/** An 8B model as issue 13 measured it: level 1 sleeps in 10 s and wakes in 2 s, level 2 in 1 s / 6.5 s. */
const eightB = { wake1: 2_000, sleep1: 10_000, wake2: 6_500, sleep2: 1_000, start: 60_000 };

describe("the learned ladder", () => {
  test("too few idle gaps: the fixed ladder", () => {
    expect(
      chooseLadder({
        gaps: gaps([90_000, 19]),
        durations: eightB,
        settings,
        explicit: new Set(),
        inSlot: false,
      }),
    ).toBeUndefined();
  });

  test("a chatty model with 2-minute pauses sleeps soon after its work, at level 1 (a 2 s wake meets 3 s)", () => {
    const choice = chooseLadder({
      gaps: gaps([5_000, 200], [120_000, 60], [3 * 3_600_000, 5]),
      durations: eightB,
      settings,
      explicit: new Set(),
      inSlot: false,
    })!;
    expect(choice.plan.first).toBe(1);
    expect(choice.plan.sleepAfter).toBeLessThan(2 * minute);
    expect(choice.plan.sleepAfter).toBeGreaterThan(gapBinUpperMs(gapBinOf(5_000))); // not inside the chatter
    expect(choice.cost.awakeMs).toBeLessThan(choice.fixed.awakeMs);
    expect(choice.cost.missShare).toBeLessThanOrEqual(0.05);
    expect(choice.settings).toMatchObject({ sleep: true, sleepLevel: 1, sleepAfter: choice.plan.sleepAfter });
  });

  test("with a looser target, level 2 (faster to sleep, 7.5 s a cycle instead of 12 s) wins", () => {
    const choice = chooseLadder({
      gaps: gaps([120_000, 60], [3 * 3_600_000, 5]),
      durations: eightB,
      settings: { ...settings, wakeTarget: 10_000 },
      explicit: new Set(),
      inSlot: false,
    })!;
    expect(choice.plan.first).toBe(2);
  });

  test("with a 3 s target an 8B model never sleeps at level 2 (6.5 s), even where few gaps would reach it", () => {
    const choice = chooseLadder({
      gaps: gaps([120_000, 200], [45 * minute, 3]),
      durations: eightB,
      settings,
      explicit: new Set(),
      inSlot: true,
    })!;
    expect(choice.plan.first).toBe(1);
  });

  test("a wake slower than the target anyway: no slower level, and no more misses than the fixed ladder", () => {
    const fourteenB = { wake1: 3_500, sleep1: 17_000, wake2: 11_000, sleep2: 1_500, start: 90_000 };
    const choice = chooseLadder({
      gaps: gaps([120_000, 60], [20 * minute, 30], [3 * 3_600_000, 5]),
      durations: fourteenB,
      settings,
      explicit: new Set(),
      inSlot: false,
    })!;
    expect(choice.plan.first).toBe(1);
    expect(choice.cost.missShare).toBeLessThanOrEqual(choice.fixed.missShare);
    expect(choice.cost.excessMs).toBeLessThanOrEqual(choice.fixed.excessMs);
  });

  test("a slot member used every 45 minutes stays at level 1 instead of stopping after 30 minutes", () => {
    const choice = chooseLadder({
      gaps: gaps([5_000, 40], [45 * minute, 40]),
      durations: eightB,
      settings,
      explicit: new Set(),
      inSlot: true,
    })!;
    // The fixed ladder stops it at 30 minutes asleep, so every return is a 60 s cold start.
    expect(choice.fixed.missShare).toBeGreaterThan(0.4);
    expect(choice.plan.deepSleepAfter).toBe(Number.POSITIVE_INFINITY);
    expect(choice.cost.missShare).toBeLessThanOrEqual(0.05);
    expect(choice.cost.awakeMs).toBeLessThan(choice.fixed.awakeMs);
  });

  test("settings the user set are kept as set", () => {
    const input = {
      gaps: gaps([120_000, 60], [3 * 3_600_000, 5]),
      durations: eightB,
      settings: { ...settings, sleepAfter: 5 * minute, sleepLevel: 2 as const },
      inSlot: false,
    };
    const both = chooseLadder({ ...input, explicit: new Set(["sleepAfter", "sleepLevel"]) })!;
    expect(both.plan).toMatchObject({ sleepAfter: 5 * minute, first: 2 });
    const level = chooseLadder({ ...input, explicit: new Set(["sleepLevel"]) })!;
    expect(level.plan.first).toBe(2);
    expect(level.plan.sleepAfter).toBeLessThan(5 * minute);
    const off = chooseLadder({
      ...input,
      settings: { ...input.settings, sleep: false },
      explicit: new Set(["sleep"]),
    })!;
    expect(off.plan.first).toBe("stop");
    expect(off.settings.sleep).toBe(false);
  });

  test("a request that comes while the engine is still going to sleep waits for the rest of it", () => {
    const plan = { sleepAfter: 20_000, first: 1 as const, deepSleepAfter: 30 * minute };
    const durations = completeDurations(eightB);
    // Gaps of 25 s: 5 s into a 10 s sleep, then a 2 s wake: 7 s > 3 s.
    const cost = planCost(plan, gaps([25_000, 10]), durations, settings, false);
    expect(cost.missShare).toBe(1);
    expect(fixedPlanOf(settings)).toEqual({ sleepAfter: 5 * minute, first: 1, deepSleepAfter: 30 * minute });
  });

  test("durations not measured yet are scaled from the measured ones by an 8B model's ratios", () => {
    expect(completeDurations({})).toEqual(referenceDurations);
    const d = completeDurations({ wake1: 4_000 });
    expect(d.wake1).toBe(4_000);
    expect(d.sleep1).toBe(20_000);
    expect(d.start).toBe(120_000);
  });
});
