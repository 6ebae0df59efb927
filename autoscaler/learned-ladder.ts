import { gapBinLowerMs, gapBinMiddleMs, gapBinUpperMs } from "./arrival-history.ts";
import type { LadderSettings } from "./ladder.ts";

/**
 * The learned ladder, as a pure function: from a model's idle gaps (how long it went without work,
 * decayed histogram) and its measured sleep, wake and start times, the ladder settings that spend
 * the fewest expected awake GPU-seconds per idle gap while wakes stay within the model's
 * `wakeTarget`.
 *
 * A plan is: stay ready for `sleepAfter`, then sleep at level 1, at level 2, or stop; a level-1
 * sleeper may go deeper after `deepSleepAfter` (level 2; a slot member stops instead); any sleeper
 * stops at `zeroAfter`. For an idle gap `g` the plan costs `g` awake GPU-ms if `g < sleepAfter`;
 * otherwise `sleepAfter`, plus the sleep itself (the GPU is busy while it copies or drops the
 * weights), plus deepening if the gap outlasts `deepSleepAfter` (wake at 1, sleep at 2), plus the
 * activation that the next request waits for: a wake from the tier the replica is in by then, or a
 * start once it stopped (a request that comes while the sleep is still under way waits for the
 * rest of it, too). A gap **misses** the target when that wait is longer than `wakeTarget`.
 *
 * The choice never costs more than the fixed ladder would on the same gaps, and never sleeps at a
 * level that wakes slower than the target when a faster one is there (a level whose wake already
 * misses the target is only used if it is the fastest). Within that it is the cheapest plan that
 * meets the target for 95% of the gaps; where no such plan exists, the cheapest that misses the
 * target no more often than the fixed ladder, and by no more on average. Settings the user set
 * explicitly stay as
 * set; `zeroAfter` stays (it bounds how long an idle engine keeps its process and host RAM, which
 * costs no GPU time). Durations not measured yet are scaled from one that was, by the ratios of an
 * 8B model (level-1 sleep 10 s, wake 2 s; level-2 sleep 1 s, wake 6.5 s; start 60 s).
 */
export interface MeasuredDurations {
  wake1?: number;
  wake2?: number;
  sleep1?: number;
  sleep2?: number;
  start?: number;
}

export type Durations = Required<MeasuredDurations>;

/** An 8B model on one GPU (issue #13's measurements; start assumed): the ratios for unmeasured ones. */
export const referenceDurations: Durations = {
  wake1: 2_000,
  wake2: 6_500,
  sleep1: 10_000,
  sleep2: 1_000,
  start: 60_000,
};

/** Each unmeasured duration scaled from the measured ones by the reference ratios. */
export function completeDurations(measured: MeasuredDurations): Durations {
  const keys = Object.keys(referenceDurations) as (keyof Durations)[];
  const scales = keys
    .filter((k) => measured[k] !== undefined && measured[k]! > 0)
    .map((k) => measured[k]! / referenceDurations[k]);
  const scale = scales.length > 0 ? scales.reduce((a, b) => a + b, 0) / scales.length : 1;
  return Object.fromEntries(
    keys.map((k) => [
      k,
      measured[k] !== undefined && measured[k]! > 0 ? measured[k]! : referenceDurations[k] * scale,
    ]),
  ) as Durations;
}

export type FirstStep = 1 | 2 | "stop";

export interface LadderPlan {
  sleepAfter: number;
  first: FirstStep;
  deepSleepAfter: number;
}

export interface PlanCost {
  /** Expected awake GPU-ms per idle gap. */
  awakeMs: number;
  /** Share of idle gaps whose next request waits longer than the wake target. */
  missShare: number;
  /** Mean over idle gaps of the wait beyond the wake target (ms). */
  excessMs: number;
}

export type LearnableSettings = LadderSettings & { wakeTarget: number };

export interface LadderChoiceInput {
  /** Weight of idle gaps per bin of `gapBinOf`. */
  gaps: readonly number[];
  durations: MeasuredDurations;
  settings: LearnableSettings;
  /** Settings the user set; they are kept as set. */
  explicit: ReadonlySet<string>;
  inSlot: boolean;
}

export interface LadderChoice {
  plan: LadderPlan;
  cost: PlanCost;
  fixedPlan: LadderPlan;
  fixed: PlanCost;
  /** Idle gaps the choice is based on (decayed weight). */
  gaps: number;
  /** The ladder settings to run with. */
  settings: LadderSettings;
}

/** Fewer idle gaps than this: the fixed ladder, for lack of evidence. */
export const minGaps = 20;
export const maxMissShare = 0.05;

export function fixedPlanOf(settings: LadderSettings): LadderPlan {
  return {
    sleepAfter: settings.sleepAfter,
    first: settings.sleep ? settings.sleepLevel : "stop",
    deepSleepAfter: settings.deepSleepAfter,
  };
}

/** Expected cost of `plan` over the gap histogram. */
export function planCost(
  plan: LadderPlan,
  gaps: readonly number[],
  durations: Durations,
  settings: LearnableSettings,
  inSlot: boolean,
): PlanCost {
  let total = 0;
  let awake = 0;
  let missed = 0;
  let excess = 0;
  const add = (weight: number, gap: number) => {
    if (weight <= 0) return;
    total += weight;
    if (gap < plan.sleepAfter) {
      awake += weight * gap;
      return;
    }
    const asleep = gap - plan.sleepAfter;
    let cost = plan.sleepAfter;
    let activation: number;
    let sleeping = 0;
    if (plan.first === "stop") activation = durations.start;
    else if (plan.first === 2) {
      cost += durations.sleep2;
      sleeping = durations.sleep2;
      activation = asleep < settings.zeroAfter ? durations.wake2 : durations.start;
    } else {
      cost += durations.sleep1;
      sleeping = durations.sleep1;
      if (asleep < plan.deepSleepAfter && asleep < settings.zeroAfter) activation = durations.wake1;
      else if (inSlot || asleep >= settings.zeroAfter) activation = durations.start;
      else {
        cost += durations.wake1 + durations.sleep2;
        activation = durations.wake2;
      }
    }
    awake += weight * (cost + activation);
    const wait = activation + Math.max(0, sleeping - asleep);
    if (wait > settings.wakeTarget) {
      missed += weight;
      excess += weight * (wait - settings.wakeTarget);
    }
  };
  for (let bin = 0; bin < gaps.length; bin++) {
    const weight = gaps[bin]!;
    if (weight <= 0) continue;
    const lower = gapBinLowerMs(bin);
    const upper = gapBinUpperMs(bin);
    const t = plan.sleepAfter;
    if (t > Math.max(lower, 1) && t < upper && Number.isFinite(upper)) {
      // The bin straddles sleepAfter: split its weight as if its gaps were spread evenly on a log scale.
      const low = Math.max(lower, 500);
      const below = Math.log(t / low) / Math.log(upper / low);
      add(weight * below, Math.sqrt(low * t));
      add(weight * (1 - below), Math.sqrt(t * upper));
    } else add(weight, gapBinMiddleMs(bin));
  }
  return total > 0
    ? { awakeMs: awake / total, missShare: missed / total, excessMs: excess / total }
    : { awakeMs: 0, missShare: 0, excessMs: 0 };
}

/** The learned ladder, or undefined when there are too few idle gaps to learn from. */
export function chooseLadder(input: LadderChoiceInput): LadderChoice | undefined {
  const { gaps, settings, explicit, inSlot } = input;
  const count = gaps.reduce((sum, w) => sum + w, 0);
  if (count < minGaps) return undefined;
  const durations = completeDurations(input.durations);
  const fixedPlan = fixedPlanOf(settings);
  const fixed = planCost(fixedPlan, gaps, durations, settings, inSlot);

  const sleepAfters = explicit.has("sleepAfter")
    ? [settings.sleepAfter]
    : [...new Set([settings.sleepAfter, ...candidateSleepAfters()])];
  let firsts: FirstStep[];
  if (!settings.sleep) firsts = ["stop"];
  else if (explicit.has("sleepLevel")) firsts = [settings.sleepLevel];
  // Sleep mode asked for by name: a level, not a stop.
  else if (explicit.has("sleep")) firsts = [1, 2];
  else firsts = [1, 2, "stop"];
  // A first step slower than the target only if nothing faster is allowed.
  const wakeOf = (f: FirstStep) =>
    f === "stop" ? durations.start : f === 1 ? durations.wake1 : durations.wake2;
  const fastest = Math.min(...firsts.map(wakeOf));
  firsts = firsts.filter((f) => wakeOf(f) <= settings.wakeTarget || wakeOf(f) === fastest);
  const deeps = explicit.has("deepSleepAfter")
    ? [settings.deepSleepAfter]
    : [settings.deepSleepAfter, Number.POSITIVE_INFINITY];

  const candidates = [{ plan: fixedPlan, cost: fixed }];
  for (const sleepAfter of sleepAfters)
    for (const first of firsts)
      for (const deepSleepAfter of first === 1 ? deeps : [settings.deepSleepAfter]) {
        const plan = { sleepAfter, first, deepSleepAfter };
        candidates.push({ plan, cost: planCost(plan, gaps, durations, settings, inSlot) });
      }
  const affordable = candidates.filter((c) => c.cost.awakeMs <= fixed.awakeMs);
  const onTarget = affordable.filter((c) => c.cost.missShare <= maxMissShare);
  const pool =
    onTarget.length > 0
      ? onTarget
      : affordable.filter(
          (c) => c.cost.missShare <= fixed.missShare + 1e-9 && c.cost.excessMs <= fixed.excessMs + 1e-6,
        );
  // Where the fixed plan qualifies, another must save more than 0.5% to replace it (no churn over noise).
  let best = pool.includes(candidates[0]!) ? candidates[0]! : pool[0]!;
  for (const c of pool) {
    const margin = best === candidates[0] ? fixed.awakeMs * 0.005 : 0;
    if (c.cost.awakeMs < best.cost.awakeMs - margin) best = c;
  }
  return {
    plan: best.plan,
    cost: best.cost,
    fixedPlan,
    fixed,
    gaps: count,
    settings: {
      sleep: best.plan.first !== "stop",
      sleepLevel: best.plan.first === "stop" ? settings.sleepLevel : best.plan.first,
      sleepAfter: best.plan.sleepAfter,
      deepSleepAfter: best.plan.deepSleepAfter,
      zeroAfter: settings.zeroAfter,
    },
  };
}

/** sleepAfter candidates: the gap scale's bounds from 10 s to 2 h (√2 apart). */
function candidateSleepAfters(): number[] {
  const values: number[] = [];
  for (let bin = 1; bin < 40; bin++) {
    const lower = gapBinLowerMs(bin);
    if (lower >= 10_000 && lower <= 2 * 3_600_000) values.push(Math.round(lower));
  }
  return values;
}
