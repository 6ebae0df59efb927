import { describe, expect, test } from "vitest";
import { advance, binMs, binRates, dayMs, emptyHistory, recordArrival } from "./arrival-history.ts";
import { holdHorizonMs, planHold, planStage, stageThreshold } from "./prewarm-hold.ts";

const monday = Date.UTC(2025, 0, 6);
const hour = 3_600_000;

/** Two weeks of a job every hour at :00 on weekdays, none at weekends. */
function hourlyWeekdays() {
  const h = emptyHistory(monday);
  for (let week = 0; week < 2; week++)
    for (let d = 0; d < 5; d++)
      for (let hh = 0; hh < 24; hh++) recordArrival(h, monday + (week * 7 + d) * dayMs + hh * hour + 5_000);
  advance(h, monday + 14 * dayMs);
  return { rates: binRates(h), exposureWeeks: h.exposureWeeks };
}

describe("planHold", () => {
  const history = hourlyWeekdays();
  const week3 = monday + 14 * dayMs;

  test("a sleeper is kept while a request is likely within the horizon, and looked at again next bin", () => {
    const now = week3 + 10 * hour + 35 * 60_000; // Monday 10:35, the next run at 11:00
    const plan = planHold({ ...history, now });
    expect(plan.hold).toBe(true);
    expect(plan.probability).toBeGreaterThan(0.9);
    expect(plan.recheckAt).toBe(Math.floor(now / binMs) * binMs + binMs);
  });

  test("not when the next likely request is further away than the horizon (a daily job that ran)", () => {
    const h = emptyHistory(monday);
    for (let d = 0; d < 14; d++) recordArrival(h, monday + d * dayMs + 9 * hour + 5_000);
    advance(h, week3);
    const daily = { rates: binRates(h), exposureWeeks: h.exposureWeeks };
    expect(planHold({ ...daily, now: week3 + 9 * hour + 40 * 60_000 }).hold).toBe(false);
    // Early in the morning, 09:00 is within four hours.
    expect(planHold({ ...daily, now: week3 + 6 * hour }).hold).toBe(true);
  });

  test("the horizon and the threshold decide it: an unlikely request within a short horizon does not", () => {
    const now = week3 + 10 * hour + 10 * 60_000; // 10:10; 11:00 is 50 minutes away
    expect(planHold({ ...history, now, horizonMs: 30 * 60_000 }).hold).toBe(false);
    expect(planHold({ ...history, now, horizonMs: holdHorizonMs }).hold).toBe(true);
    expect(planHold({ ...history, now, threshold: 0.9999999 }).hold).toBe(false);
  });

  test("no hold from less than three days of history", () => {
    const plan = planHold({ ...history, exposureWeeks: 2 / 7, now: week3 + 10 * hour });
    expect(plan).toEqual({ hold: false, probability: 0, recheckAt: Number.POSITIVE_INFINITY });
  });
});

describe("planStage", () => {
  const history = hourlyWeekdays();
  const monday3 = monday + 14 * dayMs;
  const base = { ...history, leadMs: 60_000, budgetLeftMs: 20 * 60_000 };

  test("a cold model a request is likely to want within hours is started now, to sleep until then", () => {
    const plan = planStage({ ...base, now: monday3 + 10 * hour + 10 * 60_000 });
    expect(plan.kind).toBe("now");
    expect(plan.kind === "now" && plan.probability).toBeGreaterThanOrEqual(stageThreshold);
  });

  test("not when the request is not likely enough (a stricter bar than a hold's), or the budget does not cover the start", () => {
    const h = emptyHistory(monday);
    for (let d = 0; d < 14; d++) recordArrival(h, monday + d * dayMs + 9 * hour + 5_000);
    advance(h, monday3);
    const daily = {
      rates: binRates(h),
      exposureWeeks: h.exposureWeeks,
      leadMs: 60_000,
      budgetLeftMs: 20 * 60_000,
    };
    // 09:40: the next run is tomorrow.
    const late = planStage({ ...daily, now: monday3 + 9 * hour + 40 * 60_000 });
    expect(late).toEqual({ kind: "not", recheckAt: monday3 + 9 * hour + 45 * 60_000 });
    // Likely enough for a hold, not for a start.
    const now = monday3 + 10 * hour + 10 * 60_000;
    expect(planHold({ ...history, now, threshold: 0.5 }).hold).toBe(true);
    expect(planStage({ ...base, now, threshold: 0.9999999 }).kind).toBe("not");
    expect(planStage({ ...base, now, budgetLeftMs: 59_000 })).toEqual({
      kind: "not",
      recheckAt: Number.POSITIVE_INFINITY,
    });
  });
});
