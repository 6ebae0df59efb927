import { expect, test } from "vitest";
import { eventsEnd } from "./sse.ts";

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
