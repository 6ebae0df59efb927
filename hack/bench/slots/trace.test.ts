import { describe, expect, test } from "vitest";
import { benchTraceShape } from "./scenario.ts";
import { generateTrace, overlappingBursts } from "./trace.ts";

describe("the mixed-demand trace", () => {
  const trace = generateTrace(benchTraceShape, 7);

  test("is a function of its seed", () => {
    expect(generateTrace(benchTraceShape, 7)).toEqual(trace);
    expect(generateTrace(benchTraceShape, 8).requests).not.toEqual(trace.requests);
  });

  test("bursts alternate between slot members, some overlapping, with clumps of concurrent requests", () => {
    expect(trace.bursts.length).toBeGreaterThan(10);
    for (let i = 1; i < trace.bursts.length; i++)
      expect(trace.bursts[i]!.model).not.toBe(trace.bursts[i - 1]!.model);
    expect(new Set(trace.bursts.map((b) => b.model))).toEqual(new Set(benchTraceShape.members));
    expect(overlappingBursts(trace)).toBeGreaterThan(0);
    const clumped = trace.requests.filter(
      (r, i) => i > 0 && r.burst !== undefined && r.at - trace.requests[i - 1]!.at <= 1,
    );
    expect(clumped.length).toBeGreaterThan(0);
  });

  test("requests are in arrival order, numbered, with token counts in bounds", () => {
    trace.requests.forEach((r, i) => {
      expect(r.id).toBe(i);
      if (i > 0) expect(r.at).toBeGreaterThanOrEqual(trace.requests[i - 1]!.at);
      expect(r.inputTokens).toBeGreaterThanOrEqual(benchTraceShape.inputTokens.min);
      expect(r.inputTokens).toBeLessThanOrEqual(benchTraceShape.inputTokens.max);
      expect(r.outputTokens).toBeGreaterThanOrEqual(benchTraceShape.outputTokens.min);
      expect(r.outputTokens).toBeLessThanOrEqual(benchTraceShape.outputTokens.max);
    });
  });

  test("the background model gets a steady stream over the whole trace", () => {
    const background = trace.requests.filter((r) => r.model === benchTraceShape.background.model);
    const expected = (benchTraceShape.background.requestsPerSecond * benchTraceShape.durationMs) / 1000;
    expect(background.length).toBeGreaterThan(expected * 0.8);
    expect(background.length).toBeLessThan(expected * 1.2);
    // Every 10-minute stretch has its share.
    for (let from = 0; from < benchTraceShape.durationMs; from += 600_000) {
      const inStretch = background.filter((r) => r.at >= from && r.at < from + 600_000).length;
      expect(inStretch).toBeGreaterThan(expected / 6 / 2);
    }
  });
});
