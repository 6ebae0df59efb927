import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { connect } from "node:net";
import { afterEach, expect, test } from "vitest";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { maxBufferedBytes, openStreams, resumeAfter, streamEvents } from "./event-stream.ts";
import { Timeline } from "./timeline.ts";

/** The status page's event stream over a real socket, from a timeline fed by hand. */
let server: Server | undefined;
afterEach(() => {
  server?.closeAllConnections();
  server?.close();
  server = undefined;
});

async function serve(timeline: Timeline): Promise<string> {
  server = createServer((req, res) => {
    const after = new URL(req.url!, "http://x").searchParams.get("after");
    streamEvents(req, res, timeline, Number(after ?? 0));
  });
  await new Promise<void>((resolve) => server!.listen(0, "127.0.0.1", resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
}

/** A cold start that failed, with an engine's last words of `words` characters. */
function failure(timeline: Timeline, n: number, words: number): void {
  const event = (tier: ReplicaEvent["tier"], error?: string): ReplicaEvent => ({
    model: "m",
    replica: `m-${n}`,
    address: "",
    tier,
    since: Date.now(),
    ...(error === undefined ? {} : { error }),
  });
  timeline.observe(event("starting"));
  timeline.observe(event("cold", `${n} ${"x".repeat(words)}`));
}

/** Reads events off `body` until `enough` says so; the events' types and data, in order. */
async function readEvents(
  body: ReadableStream<Uint8Array>,
  enough: (events: { type: string; data: any }[]) => boolean,
): Promise<{ type: string; data: any }[]> {
  const events: { type: string; data: any }[] = [];
  const reader = body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  while (!enough(events)) {
    const { value, done } = await reader.read();
    if (done) throw new Error(`the stream ended after ${events.length} events`);
    buffer += value;
    for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
      const block = buffer.slice(0, cut);
      buffer = buffer.slice(cut + 2);
      const type = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (type && data) events.push({ type, data: JSON.parse(data) });
    }
  }
  await reader.cancel();
  return events;
}

test("a backlog larger than the slow-client bound is sent whole, then what happens after it", async () => {
  const timeline = new Timeline();
  // 300 failures of 8 kB each (an engine's last lines): about 2.4 MB of backlog.
  for (let n = 0; n < 300; n++) failure(timeline, n, 8_000);
  expect(JSON.stringify(timeline.entries()).length).toBeGreaterThan(2 * maxBufferedBytes);
  const url = await serve(timeline);
  // Found by an outside tester: the backlog was written in one go, passed the bound before the
  // client could read a byte, and every connection was cut before its headers.
  const response = await fetch(url);
  expect(response.status).toBe(200);
  // Something happens while the client reads the backlog: it comes after the backlog, in order.
  failure(timeline, 300, 10);
  const events = await readEvents(response.body!, (got) => got.some((e) => e.data.seq === 301));
  const seqs = events.filter((e) => e.type === "entry").map((e) => e.data.seq);
  expect(seqs).toEqual(Array.from({ length: 301 }, (_, i) => i + 1));
  expect(events.map((e) => e.type).indexOf("tier")).toBeGreaterThan(seqs.indexOf(300));
  timeline.close();
});

test("a client that never reads is cut off once it is a megabyte behind, backlog or not", async () => {
  const timeline = new Timeline();
  for (let n = 0; n < 300; n++) failure(timeline, n, 8_000);
  const url = new URL(await serve(timeline));
  const socket = connect(Number(url.port), "127.0.0.1");
  socket.write(`GET / HTTP/1.1\r\nhost: ${url.host}\r\n\r\n`);
  socket.pause();
  const closed = new Promise<void>((resolve) => socket.once("close", () => resolve()));
  await new Promise<void>((resolve) => socket.once("connect", resolve));
  await new Promise((resolve) => server!.once("request", resolve));
  // What happens meanwhile waits behind the backlog; past the bound the client is let go.
  for (let n = 300; n < 500; n++) failure(timeline, n, 8_000);
  socket.resume();
  socket.on("data", () => {});
  await closed;
  // Its slot is free.
  expect(openStreams(timeline)).toBe(0);
  timeline.close();
});

test("a Last-Event-ID of this run resumes after its entry; one of another run, from this run's first", () => {
  const run = 1_765_000_000_000;
  expect(resumeAfter(`${run}-17`, run)).toBe(17);
  expect(resumeAfter(` ${run}-0 `, run)).toBe(0);
  // Snooze restarted: the client has none of this run's entries, whatever its number.
  expect(resumeAfter(`${run - 5_000}-40`, run)).toBe(0);
  // Not one of ours (none, another server's, two headers): the query's `after` says.
  for (const id of [undefined, "", "17", "abc", `${run}-1.5`, `${run}-17x`, [`${run}-1`, `${run}-2`]])
    expect([id, resumeAfter(id, run)]).toEqual([id, undefined]);
});
