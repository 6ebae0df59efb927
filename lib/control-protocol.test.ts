import { expect, test } from "vitest";
import { isDemandBody, isStatsBody } from "./control-protocol.ts";

test("a demand's and a stats report's pinnedTo is a list of replica names, or absent", () => {
  const demand = { activator: "a-1", model: "qwen", inFlight: 0, held: 1 };
  expect(isDemandBody(demand)).toBe(true);
  expect(isDemandBody({ ...demand, pinnedTo: ["qwen-1"] })).toBe(true);
  expect(isDemandBody({ ...demand, pinnedTo: "qwen-1" })).toBe(false);
  expect(isDemandBody({ ...demand, pinnedTo: [1] })).toBe(false);
  const entry = { model: "qwen", inFlight: 0, held: 1 };
  expect(
    isStatsBody({ activator: "a-1", models: [{ ...entry, pinnedTo: ["qwen-1"], routed: ["qwen-1"] }] }),
  ).toBe(true);
  expect(isStatsBody({ activator: "a-1", models: [{ ...entry, pinnedTo: [null] }] })).toBe(false);
  expect(isStatsBody({ activator: "a-1", models: [{ ...entry, routed: {} }] })).toBe(false);
});
