import { expect, test } from "vitest";
import { OutputLines } from "./output-lines.ts";

test("a line cut by the pipe's chunks, and a UTF-8 character cut in two, come whole", () => {
  const lines = new OutputLines(2_000);
  const e = Buffer.from("é\n");
  expect(lines.push(Buffer.from("INFO loading the wei"))).toEqual([]);
  expect(lines.push(Buffer.from("ghts\nINFO ready "))).toEqual(["INFO loading the weights"]);
  expect(lines.push(e.subarray(0, 1))).toEqual([]);
  expect(lines.push(e.subarray(1))).toEqual(["INFO ready é"]);
  expect(lines.end()).toEqual([]);
});

test("CRLF, CR (a progress bar's updates) and LF end lines; the last line without its end comes at the end", () => {
  const lines = new OutputLines(2_000);
  expect(lines.push(Buffer.from("a\r\nb\r 50%\r100%\nlast words"))).toEqual(["a", "b", " 50%", "100%"]);
  expect(lines.end()).toEqual(["last words"]);
  expect(lines.end()).toEqual([]);
});

test("a line that never ends is kept to its start and its end, not whole", () => {
  const lines = new OutputLines(100);
  lines.push(Buffer.from("START"));
  for (let i = 0; i < 1_000; i++) lines.push(Buffer.from("x".repeat(1_000)));
  lines.push(Buffer.from("END"));
  const [line] = lines.end();
  expect(line!.length).toBeLessThanOrEqual(201);
  expect(line!.startsWith("START")).toBe(true);
  expect(line!.endsWith("END")).toBe(true);
});
