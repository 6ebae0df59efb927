import { expect, test } from "vitest";
import { heldBack, releasable } from "./stop-hold.ts";

test("vLLM holds back the longest stop string's length less one, and nothing when the stop string is kept", () => {
  expect(heldBack({ strings: ["ab", "wxyz"], minTokens: 0, includeInOutput: false })).toBe(3);
  expect(heldBack({ strings: ["wxyz"], minTokens: 0, includeInOutput: true })).toBe(0);
  expect(heldBack({ strings: [], minTokens: 0, includeInOutput: false })).toBe(0);
  // Python counts code points: an emoji is one character.
  expect(heldBack({ strings: ["a🙂"], minTokens: 0, includeInOutput: false })).toBe(1);
});

test("the text to send: all but the held tail, all of it once finished", () => {
  expect(releasable("hello", 0, 3, false)).toBe("he");
  expect(releasable("hello wo", 2, 3, false)).toBe("llo");
  expect(releasable("hel", 0, 3, false)).toBe("");
  expect(releasable("hello", 2, 3, true)).toBe("llo");
  expect(releasable("hello", 5, 0, true)).toBe("");
  // A surrogate pair is never split.
  expect(releasable("a🙂b", 0, 1, false)).toBe("a🙂");
});
