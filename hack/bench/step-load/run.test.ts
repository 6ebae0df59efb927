import { expect, test } from "vitest";
import { integrate, type Sample, shape, trace } from "./run.ts";

test("a pair's trace is the same every time, and steps ×4 at the step", () => {
  expect(trace(1_000)).toEqual(trace(1_000));
  expect(trace(1_000)).not.toEqual(trace(1_001));
  const arrivals = trace(1_000);
  const before = arrivals.filter((t) => t < shape.stepAtMs).length / (shape.stepAtMs / 1_000);
  const after =
    arrivals.filter((t) => t >= shape.stepAtMs).length / ((shape.durationMs - shape.stepAtMs) / 1_000);
  expect(before).toBeGreaterThan(shape.baseRate * 0.6);
  expect(before).toBeLessThan(shape.baseRate * 1.4);
  expect(after / before).toBeGreaterThan(2.5);
  expect(arrivals.every((t, i) => i === 0 || t >= arrivals[i - 1]!)).toBe(true);
});

test("replica-seconds integrate each sample until the next, cut at the end of the run", () => {
  const s = (at: number, pods: number): Sample => ({
    at,
    spec: pods,
    pods,
    ready: pods,
    warming: 0,
    sleeping: 0,
  });
  expect(integrate([s(0, 1), s(1_000, 3), s(3_000, 2)], (x) => x.pods, 4_000)).toBe(1 + 6 + 2);
  expect(integrate([s(0, 1), s(5_000, 9)], (x) => x.pods, 4_000)).toBe(4);
});
