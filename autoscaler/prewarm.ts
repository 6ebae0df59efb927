import { arrivalProbability, binMs, binStartOf, dayMs, weekBinOf } from "./arrival-history.ts";

/**
 * When to prewarm a model, as a pure function of its arrival rates by time of week, the time a
 * wake (or start) takes and the budget left today. It looks up to a day ahead for the earliest
 * window of 5 to 15 minutes in which an arrival is at least `threshold` likely, and whose cost
 * (from the moment the wake must begin, `leadMs` before the window, to the window's end) fits the
 * budget. A window begins with a bin where arrivals do happen (an expected `minFirstBinRate` or
 * more): leading quiet bins would add awake time, not hits. That window is the prewarm: begin now,
 * or look again when it must begin.
 */
export const prewarmThreshold = 0.5;
/** No prewarm from less history than this (three days). */
export const minExposureWeeks = 3 / 7;
const maxWindowBins = 3;
export const minFirstBinRate = 0.05;
const lookaheadMs = dayMs;

export interface PrewarmInput {
  now: number;
  /** Expected arrivals per 5-minute bin of the week (`binRates`). */
  rates: readonly number[];
  exposureWeeks: number;
  /** From a decision to a ready replica (a wake, a start, a swap); 0 for a replica that is ready. */
  leadMs: number;
  budgetLeftMs: number;
  threshold?: number;
}

export type PrewarmPlan =
  /** Wake (or keep awake) now, until `until`: an arrival in [windowStart, until) is `probability` likely. */
  | { kind: "now"; until: number; windowStart: number; probability: number }
  /** The next window that qualifies begins its wake at `at`: look again then. */
  | { kind: "later"; at: number }
  /** Nothing qualifies within a day, or no budget, or not enough history. */
  | { kind: "none" };

export function planPrewarm(input: PrewarmInput): PrewarmPlan {
  const { now, rates, leadMs } = input;
  const threshold = input.threshold ?? prewarmThreshold;
  if (input.budgetLeftMs <= 0 || input.exposureWeeks < minExposureWeeks) return { kind: "none" };
  const ready = now + leadMs;
  for (let start = binStartOf(ready); start < ready + lookaheadMs; start += binMs) {
    if (rates[weekBinOf(start)]! < minFirstBinRate) continue;
    const from = Math.max(start, ready);
    const begin = Math.max(now, start - leadMs);
    for (let width = 1; width <= maxWindowBins; width++) {
      const until = start + width * binMs;
      if (until - begin > input.budgetLeftMs) break;
      const probability = arrivalProbability(rates, from, until);
      if (probability < threshold) continue;
      return begin <= now
        ? { kind: "now", until, windowStart: from, probability }
        : { kind: "later", at: begin };
    }
  }
  return { kind: "none" };
}

/** Prewarm time spent on one UTC day (by the day each prewarm began). */
export interface PrewarmLedger {
  day: number;
  spentMs: number;
}

export function utcDay(time: number): number {
  return Math.floor(time / dayMs);
}

/** What is left of `budgetMs` at `now`, after what was spent today and `reservedMs` held by a prewarm under way. */
export function budgetLeft(ledger: PrewarmLedger, budgetMs: number, now: number, reservedMs = 0): number {
  const spent = ledger.day === utcDay(now) ? ledger.spentMs : 0;
  return Math.max(0, budgetMs - spent - reservedMs);
}

/** The ledger after a prewarm that began at `began` spent `ms`. */
export function charge(ledger: PrewarmLedger, began: number, ms: number): PrewarmLedger {
  const day = utcDay(began);
  // A prewarm begun on a day the ledger has left behind no longer limits anything.
  if (day < ledger.day) return ledger;
  return { day, spentMs: (ledger.day === day ? ledger.spentMs : 0) + Math.max(0, ms) };
}
