import { expect, test } from "vitest";
import { moreJsonValuesThan } from "./json-values.ts";

test("objects, arrays and items are counted; what strings hold is not", () => {
  expect(moreJsonValuesThan("[{},{},{}]", 5)).toBe(true); // [ { , { , {
  expect(moreJsonValuesThan("[{},{},{}]", 6)).toBe(false);
  const quoted = JSON.stringify({ a: "{[,".repeat(100), b: 'x\\"{[' });
  expect(moreJsonValuesThan(quoted, 3)).toBe(false);
  expect(moreJsonValuesThan(`[${Array(1_000).fill("{}").join(",")}]`, 1_500)).toBe(true);
});
