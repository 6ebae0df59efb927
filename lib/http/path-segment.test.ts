import { expect, test } from "vitest";
import { decodeSegment, malformedSegment } from "./path-segment.ts";

test("a segment is decoded once; a malformed escape is undefined, and its 400 names it, kept short", () => {
  expect(decodeSegment("qwen%203")).toBe("qwen 3");
  expect(decodeSegment("%25ZZ")).toBe("%ZZ");
  for (const bad of ["%ZZ", "%E0%A4%A", "50%", "%"]) expect(decodeSegment(bad), bad).toBeUndefined();
  expect(malformedSegment("%ZZ")).toEqual({
    error: {
      message: "The path segment `%ZZ` has a malformed percent-escape.",
      type: "invalid_request_error",
      code: "invalid_path",
      param: null,
    },
  });
  expect(malformedSegment(`%${"x".repeat(500)}`).error.message.length).toBeLessThan(200);
});
