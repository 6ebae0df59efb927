import { getHeapSpaceStatistics } from "node:v8";
import { expect, test } from "vitest";
import { releaseStartupMemory } from "./release-startup-memory.ts";

const youngGeneration = () => getHeapSpaceStatistics().find((s) => s.space_name === "new_space")!;

test("gives back the young generation a burst of surviving allocations grew, and exposes no gc", () => {
  // Objects that survive scavenges make V8 grow the young generation, as start-up does.
  let kept: unknown[] = [];
  for (let round = 0; round < 50; round++) {
    for (let i = 0; i < 20_000; i++) kept.push({ round, i, text: `item ${i}` });
    if (round % 5 === 4) kept = kept.slice(-100_000);
  }
  kept = [];
  const grown = youngGeneration().physical_space_size;
  expect(grown).toBeGreaterThan(4 * 2 ** 20);
  releaseStartupMemory();
  expect(youngGeneration().physical_space_size).toBeLessThan(grown / 2);
  expect((globalThis as { gc?: unknown }).gc).toBeUndefined();
  expect(kept).toEqual([]);
});
