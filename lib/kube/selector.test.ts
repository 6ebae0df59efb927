import { describe, expect, test } from "vitest";
import { parseSelector, selectorMatcher, selectorString } from "./selector.ts";

describe("label selectors", () => {
  test("the string form of a workload selector, as the scale subresource carries it", () => {
    expect(
      selectorString({
        matchLabels: { "app.kubernetes.io/name": "qwen", app: "x" },
        matchExpressions: [
          { key: "track", operator: "In", values: ["a", "b"] },
          { key: "canary", operator: "DoesNotExist" },
          { key: "env", operator: "NotIn", values: ["dev"] },
          { key: "gpu", operator: "Exists" },
        ],
      }),
    ).toBe("app=x,app.kubernetes.io/name=qwen,track in (a,b),!canary,env notin (dev),gpu");
  });

  test.each([
    ["app=qwen", { app: "qwen" }, true],
    ["app=qwen", { app: "llama" }, false],
    ["app==qwen,tier!=x", { app: "qwen" }, true],
    ["app=qwen,tier!=x", { app: "qwen", tier: "x" }, false],
    ["track in (a,b)", { track: "b" }, true],
    ["track in (a,b)", {}, false],
    ["track notin (a)", {}, true],
    ["gpu,!canary", { gpu: "1" }, true],
    ["gpu,!canary", { gpu: "1", canary: "" }, false],
  ])("%s matches %o: %s", (text, labels, expected) => {
    expect(selectorMatcher(text)(labels)).toBe(expected);
  });

  test("round trip: what selectorString writes, parseSelector reads", () => {
    const text = selectorString({
      matchLabels: { app: "qwen" },
      matchExpressions: [{ key: "t", operator: "In", values: ["a", "b"] }],
    });
    expect(selectorMatcher(text)({ app: "qwen", t: "a" })).toBe(true);
    expect(selectorMatcher(text)({ app: "qwen", t: "c" })).toBe(false);
  });

  test("an empty or malformed selector matches nothing (never a whole namespace)", () => {
    expect(selectorMatcher("")({ app: "x" })).toBe(false);
    expect(selectorMatcher(undefined)({})).toBe(false);
    expect(parseSelector("a in (b")).toBeUndefined();
    expect(selectorMatcher("a=(b")({ a: "(b" })).toBe(false);
  });
});
