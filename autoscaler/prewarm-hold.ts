import { arrivalProbability, binMs, binStartOf } from "./arrival-history.ts";
import { minExposureWeeks } from "./prewarm.ts";

/**
 * Whether a sleeping model is kept asleep (at the level it sleeps at) rather than stopped or put
 * to deeper sleep, because its history says a request is likely soon: a pure function of its
 * arrival rates by time of week and `now`.
 *
 * This is the cheap half of prewarm. An asleep replica holds no accelerator time, so keeping it
 * costs no awake GPU-seconds and no prewarm budget; what it spares the next request is the
 * difference between a wake and a cold start (2 s against 60 s for an 8B model, and every request
 * arriving during that time waits too). What it costs is the host RAM of a level-1 sleeper for
 * longer, which `hostMemoryBudget` still bounds (the host-memory check demotes sleepers as before).
 *
 * Held while an arrival within `horizonMs` is at least `threshold` likely; looked at again at the
 * next 5-minute bin, where the rates change. Away from the model's busy times (a night, a
 * weekend, a job that ran an hour ago and runs again tomorrow) the ladder stops it as usual.
 */
export const holdHorizonMs = 4 * 3_600_000;
export const holdThreshold = 0.3;

export interface HoldInput {
  now: number;
  /** Expected arrivals per 5-minute bin of the week (`binRates`). */
  rates: readonly number[];
  exposureWeeks: number;
  horizonMs?: number;
  threshold?: number;
}

export type HoldPlan = { hold: boolean; probability: number; recheckAt: number };

export function planHold(input: HoldInput): HoldPlan {
  const { now } = input;
  if (input.exposureWeeks < minExposureWeeks)
    return { hold: false, probability: 0, recheckAt: Number.POSITIVE_INFINITY };
  const horizon = input.horizonMs ?? holdHorizonMs;
  const probability = arrivalProbability(input.rates, now, now + horizon);
  return {
    hold: probability >= (input.threshold ?? holdThreshold),
    probability,
    recheckAt: binStartOf(now) + binMs,
  };
}

/**
 * The other end of a hold: a cold model whose request is likely within the horizon (more likely
 * than a hold needs, so a model at the edge of its busy time does not start and stop by turns) is
 * started now and put to sleep as soon as it is up, so that request finds a sleeper and waits for a
 * wake instead of a cold start. Its cost is the start (and the sleep) as awake time, from the
 * prewarm budget; it begins only if what is left covers the start (`leadMs`).
 */
export const stageThreshold = 0.5;

export type StagePlan = { kind: "now"; probability: number } | { kind: "not"; recheckAt: number };

export function planStage(input: HoldInput & { leadMs: number; budgetLeftMs: number }): StagePlan {
  const plan = planHold({ ...input, threshold: input.threshold ?? stageThreshold });
  if (!plan.hold) return { kind: "not", recheckAt: plan.recheckAt };
  // Over budget: the day's budget comes back at UTC midnight (the controller looks again then).
  if (input.budgetLeftMs < input.leadMs) return { kind: "not", recheckAt: Number.POSITIVE_INFINITY };
  return { kind: "now", probability: plan.probability };
}
