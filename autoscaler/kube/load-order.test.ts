import { expect, test } from "vitest";
import { nextLoadSeq } from "../../lib/control-protocol.ts";
import { LoadOrder } from "./load-order.ts";

test("a load report older than one taken already is stale, per activator and model; one without seq is always taken", () => {
  const order = new LoadOrder(5_000);
  // The stats batched at the first held request (seq 1) arrive after the demand of the sixth (seq 6).
  expect(order.fresh("activator-a", "burst", 6, 0)).toBe(true);
  expect(order.fresh("activator-a", "burst", 1, 10)).toBe(false);
  expect(order.fresh("activator-a", "burst", 6, 10)).toBe(false);
  expect(order.fresh("activator-a", "burst", 7, 20)).toBe(true);
  // Another model, another activator: their own order.
  expect(order.fresh("activator-a", "qwen", 1, 20)).toBe(true);
  expect(order.fresh("activator-b", "burst", 1, 20)).toBe(true);
  expect(order.fresh("activator-a", "burst", undefined, 30)).toBe(true);
  // Past the expiry the last report is forgotten, as the activator's load is.
  expect(order.fresh("activator-a", "burst", 2, 5_021)).toBe(true);
});

test("stamps increase within a process and start above a process that ran before", () => {
  expect(nextLoadSeq(0, 1_000)).toBe(1_000_000);
  expect(nextLoadSeq(1_000_000, 1_000)).toBe(1_000_001);
  // A process started later, its clock past the first's last stamp.
  expect(nextLoadSeq(0, 1_001)).toBeGreaterThan(nextLoadSeq(1_000_000, 1_000));
});
