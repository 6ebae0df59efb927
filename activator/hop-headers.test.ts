import { expect, test } from "vitest";
import { endToEnd } from "./hop-headers.ts";

test("hop-by-hop headers and those the Connection header names stay behind; the rest pass as they are", () => {
  const headers = {
    connection: "Keep-Alive, X-Trace-Hop",
    "keep-alive": "timeout=5",
    "x-trace-hop": "1",
    "transfer-encoding": "chunked",
    host: "snooze.local",
    "content-length": "12",
    "snooze-model": "qwen",
    expect: "100-continue",
    "content-type": "application/json",
    "set-cookie": ["a=1", "b=2"],
    "x-absent": undefined,
  };
  expect(endToEnd(headers)).toEqual({ "content-type": "application/json", "set-cookie": ["a=1", "b=2"] });
});

test("the usual Connection values name nothing more", () => {
  for (const connection of ["keep-alive", "close", "Keep-Alive"])
    expect(endToEnd({ connection, authorization: "Bearer x" })).toEqual({ authorization: "Bearer x" });
  expect(endToEnd({ connection: "authorization", authorization: "Bearer x" })).toEqual({});
});
