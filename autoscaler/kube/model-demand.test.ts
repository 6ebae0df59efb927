import { describe, expect, test } from "vitest";
import { trimReports } from "../demand-metric.ts";
import { sampleOf } from "./model-demand.ts";

const report = (at: number, arrived: number, completed: number, inFlight = 0) => ({
  at,
  inFlight,
  held: 0,
  arrived,
  completed,
  serviceMs: completed * 200,
});

describe("a Model's demand sample (what KEDA's IsActive and the push stream say)", () => {
  test("a request held or in flight makes the Model active at once, whatever the rate", () => {
    const sample = sampleOf("ns/qwen", { load: { inFlight: 0, held: 1 }, desired: 0 }, 10_000);
    expect(sample).toMatchObject({ active: true, atZero: true, held: 1 });
  });

  test("a request answered between two polls keeps the Model active for the rate window, then not", () => {
    // One request arrived and was answered within a second; the activator reports every second.
    const reports = [report(1_000, 0, 0), report(2_000, 1, 1), report(3_000, 1, 1)];
    const now = 3_000;
    const recent = sampleOf(
      "ns/qwen",
      { load: { inFlight: 0, held: 0 }, reports: [trimReports(reports, now)], ready: 1, desired: 0 },
      now,
    );
    expect(recent.active).toBe(true);
    expect(recent.demand).toBeGreaterThan(0);
    // Past the rate window, with nothing new: inactive (KEDA's cooldown then takes it to 0).
    const later = 9_000;
    const quiet = [...reports, report(8_000, 1, 1), report(9_000, 1, 1)];
    const idle = sampleOf(
      "ns/qwen",
      { load: { inFlight: 0, held: 0 }, reports: [trimReports(quiet, later)], ready: 1, desired: 0 },
      later,
    );
    expect(idle).toMatchObject({ active: false, demand: 0 });
  });
});
