import { expect, test } from "vitest";
import { createRandom, jittered } from "./random.ts";
import { parseSize } from "./size.ts";
import { countChatTokens, countTokens, naturalLengthRange, planOutput } from "./text.ts";

test("tokens are words and punctuation marks", () => {
  expect(countTokens("Hello, world!")).toBe(4);
  expect(countTokens("")).toBe(0);
  expect(countChatTokens([{ role: "user", content: "hi there" }])).toBe(3 + 4 + 2);
  expect(countChatTokens([{ role: "user", content: [{ type: "text", text: "a b c" }] }])).toBe(3 + 4 + 3);
});

test("planned output is deterministic and honours max_tokens", () => {
  const base = { prompt: "p", engineSeed: 0, choiceIndex: 0 };
  expect(planOutput(base)).toEqual(planOutput(base));
  const natural = planOutput(base);
  expect(natural.finishReason).toBe("stop");
  expect(natural.tokens.length).toBeGreaterThanOrEqual(naturalLengthRange.min);
  expect(natural.tokens.at(-1)).toBe(".");
  const cut = planOutput({ ...base, maxTokens: 3 });
  expect(cut).toEqual({ tokens: natural.tokens.slice(0, 3), finishReason: "length" });
  expect(planOutput({ ...base, garbage: true, maxTokens: 3 }).tokens).toEqual(["!", "!", "!"]);
  expect(planOutput({ ...base, minTokens: 200 }).tokens).toHaveLength(200);
});

test("seeded jitter repeats and stays within mean ± jitter", () => {
  const a = createRandom(5);
  const b = createRandom(5);
  const values = Array.from({ length: 50 }, () => jittered(100, 20, a));
  expect(values).toEqual(Array.from({ length: 50 }, () => jittered(100, 20, b)));
  expect(Math.min(...values)).toBeGreaterThanOrEqual(80);
  expect(Math.max(...values)).toBeLessThanOrEqual(120);
  expect(new Set(values).size).toBeGreaterThan(1);
  expect(jittered(100, 0, a)).toBe(100);
});

test.each([
  ["80GiB", 80 * 2 ** 30],
  ["16Gi", 16 * 2 ** 30],
  ["512MiB", 512 * 2 ** 20],
  ["24GB", 24e9],
  ["1.5G", 1.5e9],
  ["1024", 1024],
])("parses size %s", (text, bytes) => {
  expect(parseSize(text)).toBe(bytes);
});

test.each(["", "GiB", "12 parsecs", "-1GiB"])("rejects size %j", (text) => {
  expect(parseSize(text)).toBeUndefined();
});
