import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { advance, binMs, binRates, dayMs, emptyHistory, recordArrival } from "./arrival-history.ts";
import { ModelLearner, type PrewarmContext } from "./model-learner.ts";
import { budgetLeft, charge, planPrewarm, utcDay } from "./prewarm.ts";

const monday = Date.UTC(2025, 0, 6);
const hour = 3_600_000;

/** Two weeks of weekday arrivals at 09:01. */
function officeHistory() {
  const h = emptyHistory(monday);
  for (let week = 0; week < 2; week++)
    for (let d = 0; d < 5; d++) recordArrival(h, monday + (week * 7 + d) * dayMs + 9 * hour + 60_000);
  advance(h, monday + 14 * dayMs);
  return h;
}

describe("planPrewarm", () => {
  const h = officeHistory();
  const rates = binRates(h);
  const base = { rates, exposureWeeks: h.exposureWeeks, leadMs: 40_000, budgetLeftMs: 20 * 60_000 };
  const nineMonday = monday + 14 * dayMs + 9 * hour;

  test("looks ahead for the likely window and begins the wake its lead before it", () => {
    const plan = planPrewarm({ ...base, now: monday + 14 * dayMs + 6 * hour });
    expect(plan).toEqual({ kind: "later", at: nineMonday - 40_000 });
    const now = planPrewarm({ ...base, now: nineMonday - 40_000 });
    expect(now).toMatchObject({ kind: "now", until: nineMonday + binMs, windowStart: nineMonday });
    expect(now.kind === "now" && now.probability).toBeGreaterThan(0.5);
  });

  test("quiet bins before the window are not part of it", () => {
    const plan = planPrewarm({ ...base, now: nineMonday - 20 * 60_000 });
    expect(plan).toEqual({ kind: "later", at: nineMonday - 40_000 });
  });

  test("nothing on a weekend, without budget, or from less than three days of history", () => {
    expect(planPrewarm({ ...base, now: monday + 19 * dayMs })).toEqual({ kind: "none" });
    expect(planPrewarm({ ...base, now: nineMonday - 40_000, budgetLeftMs: 5 * 60_000 })).toEqual({
      kind: "none",
    });
    expect(planPrewarm({ ...base, now: nineMonday - 40_000, exposureWeeks: 2 / 7 })).toEqual({
      kind: "none",
    });
  });

  test("a ready replica (lead 0) is kept only for a window that starts now", () => {
    expect(planPrewarm({ ...base, leadMs: 0, now: nineMonday })).toMatchObject({
      kind: "now",
      until: nineMonday + binMs,
    });
    expect(planPrewarm({ ...base, leadMs: 0, now: nineMonday + binMs })).toMatchObject({ kind: "later" });
  });
});

describe("the prewarm ledger", () => {
  test("the budget is per UTC day, by the day a prewarm began", () => {
    let ledger = { day: -1, spentMs: 0 };
    const now = monday + 10 * hour;
    expect(budgetLeft(ledger, 600_000, now)).toBe(600_000);
    ledger = charge(ledger, now, 240_000);
    expect(budgetLeft(ledger, 600_000, now, 100_000)).toBe(260_000);
    expect(budgetLeft(ledger, 600_000, now + dayMs)).toBe(600_000);
    // A prewarm begun yesterday that ends today does not reset today's ledger.
    const today = charge(ledger, now + dayMs, 60_000);
    expect(charge(today, now, 500_000)).toEqual(today);
    expect(utcDay(now)).toBe(Math.floor(now / dayMs));
  });
});

/** A learner driven through random days of traffic, with its prewarms charged as it runs them. */
describe("property: a prewarm never exceeds its budget", () => {
  test("per UTC day, the prewarm time begun that day stays within prewarmBudget", () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 30 }).map((m) => m * 60_000),
        fc.array(
          fc.record({
            gapMs: fc.integer({ min: 1_000, max: 6 * hour }),
            busyMs: fc.integer({ min: 1_000, max: 20 * 60_000 }),
          }),
          { minLength: 20, maxLength: 120 },
        ),
        fc.integer({ min: 0, max: 200_000 }),
        (budgetMs, bursts, leadMs) => {
          const spent = new Map<number, number>();
          let began: { at: number; until: number } | undefined;
          const log = {
            ...silentLogger,
            info(msg: string, fields?: Record<string, unknown>) {
              if (msg === "prewarm") began = { at: now, until: now + Number(fields?.forMs) };
              if (msg === "prewarm ended" && began) {
                const day = utcDay(began.at);
                spent.set(day, (spent.get(day) ?? 0) + Number(fields?.spentMs));
                began = undefined;
              }
            },
            child: () => log,
          };
          let now = monday;
          const learner = new ModelLearner(now, { model: "m", log });
          // Arrivals every day at the same times make prewarms likely.
          for (let d = 0; d < 7; d++) recordArrival(learner.history, monday - (d + 1) * dayMs + 9 * hour);
          learner.history.exposureWeeks = 1;
          const context = (resident: boolean, idle: boolean): PrewarmContext => ({
            budgetMs,
            resident,
            sleepDue: resident,
            ready: resident,
            mayStage: !resident,
            idle,
            parked: false,
            leadMs,
            backoffUntil: 0,
          });
          for (const { gapMs, busyMs } of bursts) {
            // Idle: look at every 5-minute boundary (the controller looks at least as often).
            const end = now + gapMs;
            while (now < end) {
              const step = learner.step(now, context(learner.prewarming, true));
              now = Math.min(end, Math.max(now + 1, Math.min(step.nextAt, now + binMs)));
            }
            learner.activity(now, true);
            learner.step(now, context(true, false));
            now += busyMs;
            learner.activity(now, false);
          }
          learner.stop(now);
          for (const ms of spent.values()) expect(ms).toBeLessThanOrEqual(budgetMs);
          return true;
        },
      ),
      { numRuns: 60 },
    );
  });
});
