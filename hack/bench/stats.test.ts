import { describe, expect, test } from "vitest";
import { median, medianOf, percentile, summarize } from "./stats.ts";

describe("benchmark statistics", () => {
  test("nearest-rank percentiles", () => {
    const values = [15, 20, 35, 40, 50];
    expect(percentile(values, 30)).toBe(20);
    expect(percentile(values, 40)).toBe(20);
    expect(percentile(values, 50)).toBe(35);
    expect(percentile(values, 100)).toBe(50);
    const hundred = Array.from({ length: 100 }, (_, i) => 100 - i);
    expect(percentile(hundred, 99)).toBe(99);
    expect(percentile(hundred, 1)).toBe(1);
    expect(percentile([], 50)).toBeNaN();
    expect(() => percentile(values, 0)).toThrow(RangeError);
  });

  test("summary and medians agree with the percentile helper", () => {
    const values = [5, 1, 4, 2, 3];
    expect(summarize(values)).toEqual({ count: 5, min: 1, p50: 3, p90: 5, p99: 5, max: 5 });
    expect(median([4, 1, 3, 2])).toBe(2.5);
    expect(medianOf([{ v: 1 }, { v: Number.NaN }, { v: 3 }, { v: 2 }], (r) => r.v)).toBe(2);
  });
});
