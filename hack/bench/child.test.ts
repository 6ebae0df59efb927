import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { forkClient } from "./child.ts";
import type { SseResult } from "./clients/sse.ts";

// An SSE engine that opens every stream and never sends an event: each stream waits forever.
const silent = createServer((_req, res) => {
  res.writeHead(200, { "content-type": "text/event-stream" });
  res.flushHeaders();
});
beforeAll(() => new Promise<void>((resolve) => silent.listen(0, "127.0.0.1", resolve)));
afterAll(() => {
  silent.closeAllConnections();
  return new Promise<void>((resolve) => silent.close(() => resolve()));
});

test("a client's reply keeps its Infinity and NaN across the IPC channel (a stream that never started reads as never, not 0)", {
  timeout: 20_000,
}, async () => {
  const { port } = silent.address() as AddressInfo;
  const client = await forkClient<{ cmd: "run" }>("./clients/sse.ts", {
    origin: `http://127.0.0.1:${port}`,
    path: "/v1/chat/completions",
    body: "{}",
    streams: 3,
    warmupMs: 0,
    startTimeoutMs: 300,
    windowMs: 100,
  });
  try {
    const result = await client.ask<SseResult>({ cmd: "run" }, 10_000);
    expect(result.streamsStarted).toBe(3);
    expect(result.firstEventMs).toEqual({ p99: Number.POSITIVE_INFINITY, max: Number.POSITIVE_INFINITY });
    expect(result.allStartedSeconds).toBeNaN();
  } finally {
    await client.close();
  }
});
