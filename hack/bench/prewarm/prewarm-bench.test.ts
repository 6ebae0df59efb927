import { describe, expect, test } from "vitest";
import { replay } from "./replay.ts";
import { checkGoals, summarize } from "./results.ts";
import { dayMs, generateTrace, profileRate } from "./trace.ts";
import { policies, slots, worldModels } from "./world.ts";

describe("the prewarm benchmark", () => {
  test("the trace is replayable: the same seed gives the same requests, another seed others", () => {
    const a = generateTrace(worldModels, 2, 7);
    const b = generateTrace(worldModels, 2, 7);
    const c = generateTrace(worldModels, 2, 8);
    expect(a.requests).toEqual(b.requests);
    expect(a.requests.length).toBeGreaterThan(1_000);
    expect(c.requests).not.toEqual(a.requests);
    // Monday 2025-01-06 00:00 UTC; arrivals in order.
    expect(new Date(a.start).getUTCDay()).toBe(1);
    expect(a.requests.every((r, i) => i === 0 || r.at >= a.requests[i - 1]!.at)).toBe(true);
    expect(profileRate("office", 3)).toBeLessThan(profileRate("office", 10));
  });

  test("a short replay runs through the real control plane; its GPU-seconds agree with the events", async () => {
    const models = worldModels.filter((m) => m.slot === "gpu-0");
    const trace = generateTrace(models, 1, 3);
    const fixed = policies.find((p) => p.name === "snooze-fixed")!;
    const result = await replay(trace, models, slots.slice(0, 1), fixed, 3);
    const summary = summarize(result, trace.start, trace.start + dayMs);
    expect(summary.requests).toBe(trace.requests.length);
    expect(summary.hits).toBeGreaterThan(0);
    expect(summary.awakeHours).toBeGreaterThan(0);
    expect(summary.accountingError).toBeLessThan(0.01);
    expect(result.outcomes.every((o) => o.waitMs >= 0)).toBe(true);
  });

  test("the goals are read from the four Snooze rows", () => {
    const row = (policy: string, hits: number, awakeHours: number, waitP95Ms: number) => ({
      policy,
      requests: 100,
      sleeping: hits,
      cold: 0,
      hits,
      waitP50Ms: 0,
      waitP95Ms,
      waitP99Ms: waitP95Ms,
      refused: 0,
      awakeHours,
      prewarms: { total: 0, hit: 0, wasted: 0, asleep: 0, hours: 0 },
      byModel: new Map(),
      accountingError: 0,
    });
    const goals = checkGoals([
      row("snooze-fixed", 100, 10, 5_000),
      row("snooze-prewarm", 40, 10.5, 3_000),
      row("snooze-learned", 120, 8, 5_000),
      row("snooze-learned+prewarm", 70, 9, 4_000),
    ]);
    expect(goals.prewarm.met).toBe(true);
    expect(goals.prewarmOnLearned.met).toBe(false);
    expect(goals.learned.met).toBe(true);
  });
});
