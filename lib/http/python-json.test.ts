import { expect, test } from "vitest";
import { nonFiniteAsNull, parseAsPython } from "./python-json.ts";

test("NaN, Infinity and -Infinity, as Python's json.dumps writes them, parse; they read as null", () => {
  expect(parseAsPython('{"model":"qwen","temperature":NaN,"top_p":Infinity,"seed":-Infinity}')).toEqual({
    model: "qwen",
    temperature: null,
    top_p: null,
    seed: null,
  });
  expect(parseAsPython("[NaN, 1, -Infinity]")).toEqual([null, 1, null]);
});

test("inside a string they are text, left as they are", () => {
  expect(parseAsPython('{"model":"NaN","prompt":"Infinity \\" NaN","n":NaN}')).toEqual({
    model: "NaN",
    prompt: 'Infinity " NaN',
    n: null,
  });
  expect(nonFiniteAsNull('{"a":"NaN"}')).toBeUndefined();
});

test("JSON that is invalid for another reason is refused with JSON.parse's own message", () => {
  for (const text of ["{nope", '{"a":NaN,}', '{"a":-NaN}', '{"a":NaNa}', '{"a":nan}']) {
    let said: unknown;
    try {
      JSON.parse(text);
    } catch (error) {
      said = (error as Error).message;
    }
    expect(() => parseAsPython(text)).toThrow(said as string);
  }
});

test("plain JSON parses as JSON.parse parses it, with a reviver", () => {
  const seen: string[] = [];
  expect(
    parseAsPython('{"a":1.5,"b":NaN}', (key, value) => {
      seen.push(key);
      return value;
    }),
  ).toEqual({ a: 1.5, b: null });
  expect(seen).toEqual(["a", "b", ""]);
});
