import { expect, test } from "vitest";
import { escapeLineBreakers } from "./json-line.ts";

test("JSON keeps its meaning and loses what breaks a line or acts on a terminal: U+2028, U+2029, the C1 controls, the bidirectional marks", () => {
  const value = { "key\u2028": "a\u2028b\u2029c\u0085d\u009be\u202ef\u2066g\u200eh\u00a0é😀" };
  const text = escapeLineBreakers(JSON.stringify(value));
  expect(text).toBe('{"key\\u2028":"a\\u2028b\\u2029c\\u0085d\\u009be\\u202ef\\u2066g\\u200eh\u00a0é😀"}');
  expect(JSON.parse(text)).toEqual(value);
});
