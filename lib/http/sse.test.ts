import { expect, test } from "vitest";
import { doneEnd, eventsEnd } from "./sse.ts";

test("where the last whole SSE event ends, for each way of writing a blank line", () => {
  const end = (text: string) => eventsEnd(Buffer.from(text));
  expect(end('data: {"a":1}\n\n')).toBe(15);
  expect(end('data: {"a":1}\r\n\r\n')).toBe(17);
  expect(end('data: {"a":1}\r\r')).toBe(15);
  expect(end('data: {"a":1}\n\ndata: {"b"')).toBe(15);
  expect(end('data: {"a":1}\r\n\r\ndata: {"b":2}\n')).toBe(17);
  expect(end('data: {"b"')).toBe(0);
  expect(end("")).toBe(0);
});

test("where the `data: [DONE]` event ends, whatever comes after it; none in data that only mentions it", () => {
  const end = (text: string) => doneEnd(Buffer.from(text));
  expect(end('data: {"a":1}\n\ndata: [DONE]\n\n')).toBe(29);
  expect(end('data: {"a":1}\n\ndata: [DONE]\n\ndata: {"late":1}\n\n')).toBe(29);
  expect(end("data: [DONE]\r\n\r\n")).toBe(16);
  expect(end("data:[DONE]\r\r")).toBe(13);
  expect(end(": progress\n\ndata: [DONE]\n\n")).toBe(26);
  // A token that says [DONE] is data of another event, not the end.
  expect(end('data: {"text":"data: [DONE]"}\n\n')).toBe(-1);
  expect(end("data: [DONE] later\n\n")).toBe(-1);
  // Not whole yet: the blank line has not come.
  expect(end("data: [DONE]\n")).toBe(-1);
  expect(end('data: {"a":1}\n\n')).toBe(-1);
});
