import { expect, test } from "vitest";
import { formatDuration, parseDuration } from "./duration.ts";

test.each([
  ["250ms", 250],
  ["30s", 30_000],
  ["5m", 300_000],
  ["1h30m", 5_400_000],
  ["1.5s", 1_500],
  ["0", 0],
])("parses %s", (text, ms) => {
  expect(parseDuration(text)).toBe(ms);
});

test.each(["", "5", "5 minutes", "-1s", "1d", "s"])("rejects %j", (text) => {
  expect(parseDuration(text)).toBeUndefined();
});

test("formats", () => {
  expect([850, 2_500, 180_000, 3_900_000].map(formatDuration)).toEqual(["850ms", "2.5s", "3m", "1h5m"]);
  // Rounding carries into the next unit instead of showing 60 seconds or 60 minutes.
  expect([59_960, 299_600, 3_599_700, 119_400].map(formatDuration)).toEqual(["1m", "5m", "1h", "1m59s"]);
});
