import { describe, expect, test } from "vitest";
import {
  advance,
  arrivalProbability,
  binMs,
  binRates,
  dayMs,
  emptyHistory,
  gapBinLowerMs,
  gapBinOf,
  gapBinUpperMs,
  recordArrival,
  recordGap,
  weekBinOf,
} from "./arrival-history.ts";

const monday = Date.UTC(2025, 0, 6);
const hour = 3_600_000;

describe("arrival history", () => {
  test("bins of the week start on Monday 00:00 UTC, 5 minutes each", () => {
    expect(weekBinOf(monday)).toBe(0);
    expect(weekBinOf(monday + 9 * hour + 4 * 60_000)).toBe(108);
    expect(weekBinOf(monday + 7 * dayMs - 1)).toBe(2015);
    expect(weekBinOf(monday + 7 * dayMs)).toBe(0);
    expect(weekBinOf(monday - 1)).toBe(2015);
  });

  test("idle gaps fall in bins √2 apart, from 1 s", () => {
    expect(gapBinOf(500)).toBe(0);
    expect(gapBinOf(1_000)).toBe(0);
    expect(gapBinOf(1_500)).toBe(1);
    expect(gapBinOf(120_000)).toBe(13);
    expect(gapBinLowerMs(13)).toBeLessThanOrEqual(120_000);
    expect(gapBinUpperMs(13)).toBeGreaterThan(120_000);
    expect(gapBinOf(30 * dayMs)).toBe(39);
  });

  test("exposure counts observed time only; each UTC midnight decays everything (half-life two weeks)", () => {
    const h = emptyHistory(monday);
    recordArrival(h, monday + hour);
    recordGap(h, monday + hour, 90_000);
    advance(h, monday + 7 * dayMs);
    expect(h.exposureWeeks).toBeCloseTo(0.5 ** (7 / 14), 5);
    expect(h.weekly[12]).toBeCloseTo(0.5 ** (7 / 14), 5);
    // A restart's downtime ages the evidence but is not observed.
    const before = h.exposureWeeks;
    advance(h, monday + 14 * dayMs, false);
    expect(h.exposureWeeks).toBeCloseTo(before * 0.5 ** (7 / 14), 5);
    expect(h.gaps[gapBinOf(90_000)]).toBeCloseTo(0.5, 5);
  });

  test("histories without arrivals share their empty bins; an arrival writes only its own history", () => {
    const a = emptyHistory(monday);
    const b = emptyHistory(monday);
    expect(a.weekly).toBe(b.weekly);
    advance(a, monday + 3 * dayMs);
    recordArrival(a, monday + 3 * dayMs + hour);
    expect(a.weekly[weekBinOf(monday + 3 * dayMs + hour)]).toBe(1);
    expect(b.weekly.every((count) => count === 0)).toBe(true);
    expect(emptyHistory(monday).weekly.every((count) => count === 0)).toBe(true);
    expect(a.weekly).toHaveLength(b.weekly.length);
  });

  test("a bin's rate leans on the time of day until weeks of its own accumulate", () => {
    const h = emptyHistory(monday);
    // Weekdays at 09:01 for one week.
    for (let d = 0; d < 5; d++) recordArrival(h, monday + d * dayMs + 9 * hour + 60_000);
    advance(h, monday + 7 * dayMs);
    const rates = binRates(h);
    const nine = (day: number) => rates[weekBinOf(monday + day * dayMs + 9 * hour)]!;
    expect(nine(0)).toBeGreaterThan(0.69); // Monday: its own arrival and the daily rhythm
    expect(nine(5)).toBeLessThan(nine(0) / 2); // Saturday: only the daily rhythm, shrunk
    expect(rates[weekBinOf(monday + 3 * hour)]).toBe(0);
    expect(
      arrivalProbability(rates, monday + 7 * dayMs + 9 * hour, monday + 7 * dayMs + 9 * hour + binMs),
    ).toBeCloseTo(1 - Math.exp(-nine(0)), 6);
    // Half a bin: half its expected arrivals.
    const half = arrivalProbability(rates, monday + 9 * hour, monday + 9 * hour + binMs / 2);
    expect(half).toBeCloseTo(1 - Math.exp(-nine(0) / 2), 6);
  });
});
