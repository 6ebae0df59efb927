import { expect, test } from "vitest";
import { formatLogsAfter, parseLogsAfter } from "./logs-after.ts";

test("every replica id a model id allows comes back as it went, commas and colons included", () => {
  // Found by an outside tester: `a,b-2:4` was read as two replicas, `a` and `b-2:4`, and refused.
  const read = new Map([
    ["a,b-2", 4],
    ["qwen:7b-1", 10],
    ["x%2C&y=#z?-3", 0],
    ["模型-1", 7],
  ]);
  const after = parseLogsAfter(formatLogsAfter(read))!;
  for (const [replica, lines] of read) expect([replica, after(replica)]).toEqual([replica, lines]);
  expect(after("other-1")).toBe(0);
});

test("the plain forms stay as they were: a count for all, raw ids, nothing; anything else is refused", () => {
  expect(parseLogsAfter("3")!("any-1")).toBe(3);
  expect(parseLogsAfter("qwen-1:3,qwen-2:0")!("qwen-1")).toBe(3);
  expect(parseLogsAfter("50%-1:2")!("50%-1")).toBe(2);
  expect(parseLogsAfter(null)!("qwen-1")).toBeNaN();
  for (const text of ["abc", "-5", "qwen-1:x", "a,b-1"]) expect(parseLogsAfter(text)).toBeUndefined();
});
