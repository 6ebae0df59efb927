import { expect, test } from "vitest";
import { streamToEnd } from "./stream-eviction.ts";

test("the stream whose writes have waited longest gives its slot, else the oldest", () => {
  const a = { name: "a", openedAt: 1, stalledSince: undefined };
  const b = { name: "b", openedAt: 2, stalledSince: 50 };
  const c = { name: "c", openedAt: 3, stalledSince: 40 };
  const d = { name: "d", openedAt: 0, stalledSince: undefined };
  expect(streamToEnd([a, b, c, d])?.name).toBe("c");
  expect(streamToEnd([a, b, d])?.name).toBe("b");
  expect(streamToEnd([a, d])?.name).toBe("d");
  expect(streamToEnd([a])?.name).toBe("a");
  expect(streamToEnd([])).toBeUndefined();
});
