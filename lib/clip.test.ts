import fc from "fast-check";
import { describe, expect, test } from "vitest";
import { clip, clipMiddle } from "./clip.ts";

describe("clip", () => {
  test("short text is kept; long text is cut to max characters and marked", () => {
    expect(clip("abc", 5)).toBe("abc");
    expect(clip("abcdef", 3)).toBe("abc…");
  });

  test("never between the halves of an emoji (found by an outside tester: Python's print failed on it)", () => {
    expect(clip("a😀😀", 2)).toBe("a…");
    expect(clip("a😀😀", 3)).toBe("a😀…");
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), fc.integer({ min: 1, max: 50 }), (text, max) => {
        const clipped = clip(text, max);
        // Well-formed: no lone surrogate, so it encodes to UTF-8 and back unchanged.
        expect(clipped.isWellFormed()).toBe(true);
        expect(clipped.length).toBeLessThanOrEqual(max + 1);
      }),
    );
  });
});

describe("clipMiddle", () => {
  test("keeps both ends of a long text, well-formed", () => {
    expect(clipMiddle("abc", 4)).toBe("abc");
    expect(clipMiddle("abcdefghij", 4)).toBe("ab…ij");
    fc.assert(
      fc.property(fc.string({ unit: "grapheme" }), fc.integer({ min: 2, max: 50 }), (text, max) => {
        const clipped = clipMiddle(text, max);
        expect(clipped.isWellFormed()).toBe(true);
        expect(clipped.length).toBeLessThanOrEqual(max + 1);
      }),
    );
  });
});
