/**
 * Load generator for streaming, in its own process (forked with IPC): opens
 * `streams` connections, starts one SSE stream on each, waits
 * until every stream has delivered its first event plus `warmupMs`, then
 * counts the events (`data: ...` blocks) that arrive during `windowMs`.
 * It sends `{window: "start"}` and `{window: "end"}` as the window opens and
 * closes, so the benchmark reads the proxy's CPU over the same interval.
 *
 * It speaks HTTP/1.1 over plain sockets and only counts blank lines: a
 * client must be cheaper per event than the proxies it measures, and an HTTP
 * client library is not (chunked framing never contains "\n\n", so counting
 * works on the raw bytes).
 *
 * Command (IPC): run → {events, windowMs, streamsStarted, streamsLive, errors}.
 */
import { connect, type Socket } from "node:net";
import { percentile } from "../stats.ts";

export interface SseConfig {
  origin: string;
  path: string;
  body: string;
  streams: number;
  warmupMs: number;
  /** How long to wait for every stream's first event before counting anyway. */
  startTimeoutMs: number;
  windowMs: number;
}

export interface SseResult {
  events: number;
  windowMs: number;
  /** Streams whose response started (status 200). */
  streamsStarted: number;
  /** Streams that delivered events during the window. */
  streamsLive: number;
  /** Seconds from sending the requests until every stream had its first event; NaN when some never did. */
  allStartedSeconds: number;
  /**
   * Each stream's own wait, from writing its request on its connected socket to its first event,
   * in ms: the slowest, and the 99th percentile (streams that never had one count as never).
   */
  firstEventMs: { p99: number; max: number };
  errors: string[];
}

const config = JSON.parse(process.argv[2]!) as SseConfig;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const newline = 10;

async function run(): Promise<SseResult> {
  const url = new URL(config.origin);
  const body = Buffer.from(config.body);
  const head = Buffer.from(
    `POST ${config.path} HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
      `Accept: text/event-stream\r\nContent-Length: ${body.length}\r\n\r\n`,
  );
  let counting = false;
  let events = 0;
  let started = 0;
  let firstEvents = 0;
  const errors: string[] = [];
  const liveInWindow = new Set<number>();
  const firstEventMs: number[] = [];
  const sockets: Socket[] = [];
  const sent = performance.now();
  let allStarted = 0;
  const everyFirst = Promise.withResolvers<void>();
  let closing = false;

  for (let i = 0; i < config.streams; i++) {
    const socket = connect(Number(url.port), url.hostname);
    sockets.push(socket);
    socket.setNoDelay(true);
    let statusChecked = false;
    let lastWasNewline = false;
    let seen = false;
    let written = 0;
    socket.once("connect", () => {
      written = performance.now();
      socket.write(Buffer.concat([head, body]));
    });
    socket.on("data", (chunk: Buffer) => {
      if (!statusChecked) {
        statusChecked = true;
        if (!chunk.subarray(0, 12).toString("latin1").startsWith("HTTP/1.1 200")) {
          if (errors.length < 20) errors.push(chunk.subarray(0, 200).toString("latin1"));
          socket.destroy();
          return;
        }
        started++;
      }
      // An event ends with a blank line; count "\n\n", also across chunk boundaries.
      let count = lastWasNewline && chunk[0] === newline ? 1 : 0;
      let at = chunk.indexOf("\n\n");
      while (at >= 0) {
        count++;
        at = chunk.indexOf("\n\n", at + 2);
      }
      const n = chunk.length;
      lastWasNewline = chunk[n - 1] === newline && !(n >= 2 && chunk[n - 2] === newline);
      if (count === 0) return;
      if (!seen) {
        seen = true;
        firstEventMs.push(performance.now() - written);
        if (++firstEvents === config.streams) {
          allStarted = performance.now();
          everyFirst.resolve();
        }
      }
      if (counting) {
        events += count;
        liveInWindow.add(i);
      }
    });
    socket.on("error", (error) => {
      if (!closing && errors.length < 20) errors.push(error.message);
    });
  }
  // Streams that have not started by then (a proxy that caps concurrent streams) are
  // reported as not live rather than failing the run.
  const timer = setTimeout(() => everyFirst.resolve(), config.startTimeoutMs);
  try {
    await everyFirst.promise.finally(() => clearTimeout(timer));
    await sleep(config.warmupMs);
    process.send!({ window: "start" });
    const windowStart = performance.now();
    counting = true;
    await sleep(config.windowMs);
    counting = false;
    const windowMs = performance.now() - windowStart;
    process.send!({ window: "end" });
    return {
      events,
      windowMs,
      streamsStarted: started,
      streamsLive: liveInWindow.size,
      allStartedSeconds: allStarted ? (allStarted - sent) / 1000 : Number.NaN,
      firstEventMs: waits(firstEventMs, config.streams),
      errors,
    };
  } finally {
    closing = true;
    for (const socket of sockets) socket.destroy();
  }
}

/** The 99th percentile and the maximum of `ms` over `of` streams; a stream with no figure waited forever. */
function waits(ms: number[], of: number): { p99: number; max: number } {
  const all = [...ms, ...Array<number>(Math.max(0, of - ms.length)).fill(Number.POSITIVE_INFINITY)];
  return { p99: percentile(all, 99), max: Math.max(...all) };
}

process.on("message", async (message: { id: number; command: { cmd: "run" } }) => {
  try {
    process.send!({ id: message.id, reply: await run() });
  } catch (error) {
    process.send!({ id: message.id, error: (error as Error).message });
  }
  setImmediate(() => process.exit(0));
});
process.on("disconnect", () => process.exit(0));
setTimeout(() => process.exit(3), config.startTimeoutMs + config.warmupMs + config.windowMs + 60_000).unref();
process.send!({ ready: true });
