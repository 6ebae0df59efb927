import { arrivalBins, gapBins } from "../lib/learning-snapshot.ts";

/**
 * One model's traffic history, as plain numbers: when its requests tend to arrive (by time of
 * week) and how long its idle gaps last. Every function takes the time as an input; nothing here
 * reads a clock. Old evidence fades: at each UTC midnight every count and the exposure are
 * multiplied by the same factor (half-life two weeks), so a model whose rhythm changes is
 * re-learned within a few weeks.
 *
 * An **arrival** is the start of work after at least a quiet minute (`minQuietMs`): the moment a
 * sleeping engine would have been needed. Arrivals are counted per 5-minute bin of the week
 * (Monday 00:00 UTC is bin 0). The **rate** of a bin is its count per week observed, shrunk
 * towards the rate of the same time of day on all days (weight: one week), so a few days of
 * history already predict the daily rhythm and the weekly one takes over as weeks accumulate.
 */
export const binMs = 5 * 60_000;
export const dayMs = 86_400_000;
export const weekMs = 7 * dayMs;
export const binsPerDay = dayMs / binMs;
export const minQuietMs = 60_000;
export const halfLifeDays = 14;
/** Weight (in weeks) of the time-of-day rate in a bin's rate. */
const shrinkWeeks = 1;
const dailyDecay = 0.5 ** (1 / halfLifeDays);
/** 1970-01-01 was a Thursday: bin 0 of the week is Monday 00:00 UTC, 4 days later. */
const mondayOffsetMs = 4 * dayMs;

export interface ArrivalHistory {
  /** Decayed arrivals per 5-minute bin of the week. */
  weekly: number[];
  /** Decayed weeks observed (time the controller watched this model). */
  exposureWeeks: number;
  /** Decayed idle gaps per bin of `gapBinOf`. */
  gaps: number[];
  /** Time (ms) the history is up to date with. */
  at: number;
  /** Bumped on every change, for caches of what is computed from it. */
  version: number;
}

/**
 * The weekly bins of every history no arrival was recorded in: one frozen array shared by all of
 * them, replaced by a model's own at its first arrival (2,016 bins are 16 KiB, which each model of
 * a large snooze.yaml held from the start, whether a request ever came or not; issue 14).
 */
const noArrivals: number[] = Object.freeze(new Array<number>(arrivalBins).fill(0)) as number[];

export function emptyHistory(now: number): ArrivalHistory {
  return {
    weekly: noArrivals,
    exposureWeeks: 0,
    gaps: new Array<number>(gapBins).fill(0),
    at: now,
    version: 0,
  };
}

/** The 5-minute bin of the week that `time` falls in. */
export function weekBinOf(time: number): number {
  const sinceMonday = (((time - mondayOffsetMs) % weekMs) + weekMs) % weekMs;
  return Math.floor(sinceMonday / binMs);
}

/** Start (ms) of the 5-minute bin `time` falls in. */
export function binStartOf(time: number): number {
  return Math.floor(time / binMs) * binMs;
}

/** Bins of a √2-spaced scale: bin i holds gaps from 2^(i/2) s up to 2^((i+1)/2) s; below 1 s is bin 0. */
export function gapBinOf(gapMs: number): number {
  if (gapMs < 1_000) return 0;
  return Math.min(gapBins - 1, Math.floor(2 * Math.log2(gapMs / 1_000)));
}

export function gapBinLowerMs(bin: number): number {
  return bin === 0 ? 0 : 1_000 * 2 ** (bin / 2);
}

export function gapBinUpperMs(bin: number): number {
  return bin === gapBins - 1 ? Number.POSITIVE_INFINITY : 1_000 * 2 ** ((bin + 1) / 2);
}

/** The gap that stands for a bin: the geometric middle of its bounds. */
export function gapBinMiddleMs(bin: number): number {
  if (bin === 0) return 500;
  return 1_000 * 2 ** ((bin + 0.5) / 2);
}

/**
 * Brings the history up to `now`: the time in between counts as observed when `observed` (the
 * controller was watching; a restart's downtime is not), and each UTC midnight passed decays it.
 */
export function advance(history: ArrivalHistory, now: number, observed = true): void {
  if (now <= history.at) return;
  const days = Math.floor(now / dayMs) - Math.floor(history.at / dayMs);
  if (observed) history.exposureWeeks += (now - history.at) / weekMs;
  if (days > 0) {
    const factor = dailyDecay ** Math.min(days, 10 * halfLifeDays);
    history.exposureWeeks *= factor;
    if (history.weekly !== noArrivals)
      for (let i = 0; i < history.weekly.length; i++) history.weekly[i]! *= factor;
    for (let i = 0; i < history.gaps.length; i++) history.gaps[i]! *= factor;
  }
  history.at = now;
  history.version++;
}

export function recordArrival(history: ArrivalHistory, now: number): void {
  advance(history, now);
  if (history.weekly === noArrivals) history.weekly = new Array<number>(arrivalBins).fill(0);
  history.weekly[weekBinOf(now)]! += 1;
  history.version++;
}

export function recordGap(history: ArrivalHistory, now: number, gapMs: number): void {
  advance(history, now);
  history.gaps[gapBinOf(gapMs)]! += 1;
  history.version++;
}

/**
 * Expected arrivals per occurrence of each bin of the week: the bin's own count per week observed,
 * shrunk towards the same time of day on every day. All zero without any exposure.
 */
export function binRates(history: ArrivalHistory): number[] {
  const exposure = history.exposureWeeks;
  const rates = new Array<number>(history.weekly.length).fill(0);
  if (exposure <= 0) return rates;
  const days = history.weekly.length / binsPerDay;
  for (let slot = 0; slot < binsPerDay; slot++) {
    let sum = 0;
    for (let d = 0; d < days; d++) sum += history.weekly[d * binsPerDay + slot]!;
    const daily = sum / days / exposure;
    for (let d = 0; d < days; d++) {
      const bin = d * binsPerDay + slot;
      rates[bin] = (history.weekly[bin]! + shrinkWeeks * daily) / (exposure + shrinkWeeks);
    }
  }
  return rates;
}

/**
 * The chance of at least one arrival in [from, to), from the bins' rates (arrivals within a bin
 * taken as evenly spread, a Poisson count per bin).
 */
export function arrivalProbability(rates: readonly number[], from: number, to: number): number {
  let expected = 0;
  for (let start = binStartOf(from); start < to; start += binMs) {
    const overlap = Math.min(to, start + binMs) - Math.max(from, start);
    if (overlap > 0) expected += rates[weekBinOf(start)]! * (overlap / binMs);
  }
  return 1 - Math.exp(-expected);
}

/** Total weight of the recorded gaps. */
export function gapCount(history: ArrivalHistory): number {
  return history.gaps.reduce((sum, w) => sum + w, 0);
}
