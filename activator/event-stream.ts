import type { IncomingMessage, ServerResponse } from "node:http";
import { sendError } from "../lib/http/json.ts";
import { escapeLineBreakers } from "../lib/json-line.ts";
import { openAIError } from "../lib/openai-error.ts";
import { type OpenStream, streamToEnd } from "./stream-eviction.ts";
import type { Timeline, TimelineMessage } from "./timeline.ts";

const keepAliveMs = 15_000;
/** A client this far behind on the event stream is cut off (it reconnects and reads the backlog). */
export const maxBufferedBytes = 1 << 20;
/**
 * A write the client has not read within this is the end of its stream: a reader that is there
 * takes a write in milliseconds (it reconnects and resumes if it was only slow); one that is not
 * held a slot forever (found by an outside tester, see activator/stream-eviction.ts).
 */
export const stalledWriteMs = 10_000;

/** The open streams of each timeline, to free a slot for a new one when all are taken. */
const openStreams = new WeakMap<Timeline, Set<OpenStream & { end(): void }>>();

type StreamMessage = TimelineMessage | { type: "hello"; data: unknown };

/**
 * An entry's event id: this run (when the timeline began, epoch ms) and the entry's `seq`. A browser's
 * `EventSource` sends the last one back as `Last-Event-ID` when it reconnects; the run tells an id
 * from before a restart (whose numbers mean nothing now) from one of this run.
 */
const eventId = (startedAt: number, seq: number) => `${startedAt}-${seq}`;

/**
 * The entry a reconnecting client has, from its `Last-Event-ID`: the seq of an id of this run; 0 (it
 * has none of this run's) for one of another; undefined for none or not one of ours (then the
 * query's `after` says).
 */
export function resumeAfter(
  lastEventId: string | string[] | undefined,
  startedAt: number,
): number | undefined {
  const id = typeof lastEventId === "string" ? /^(\d+)-(\d+)$/.exec(lastEventId.trim()) : null;
  if (!id) return undefined;
  return Number(id[1]) === startedAt ? Number(id[2]) : 0;
}

/** One message as an SSE event: its data is JSON, one line (JSON escapes every line break SSE knows). */
function frame(message: StreamMessage, startedAt: number): string {
  const data =
    message.type === "tier"
      ? message.event
      : message.type === "entry"
        ? message.entry
        : message.type === "models"
          ? {}
          : message.data;
  const id = message.type === "entry" ? `id: ${eventId(startedAt, message.entry.seq)}\n` : "";
  return `${id}event: ${message.type}\ndata: ${escapeLineBreakers(JSON.stringify(data))}\n\n`;
}

/**
 * Server-sent events (`GET /snooze/v1/events/stream`): the entries after `after`, then every
 * replica event and entry as it happens. Each entry's event has an id (see `eventId`), so a
 * standard SSE client that reconnects resumes after the last entry it had instead of being sent
 * the whole hour again (found by an outside tester: without ids every reconnect repeated it).
 *
 * The backlog (up to the timeline's 1,000 entries, a failure's several kB of engine output each)
 * goes out as the client reads it, not all at once: written in one go it passed the slow-client
 * bound below before the client could read a byte, and every connection was cut at once (found by
 * an outside tester: after about 130 long failures in an hour the status page could never connect
 * again). What happens meanwhile waits behind it, in order, within that same bound.
 */
export function streamEvents(
  req: IncomingMessage,
  res: ServerResponse,
  timeline: Timeline,
  after: number,
): void {
  /** Live events held while the backlog goes out; undefined once it is out. */
  let waiting: string[] | undefined = [];
  let waitingBytes = 0;
  const stream: OpenStream & { end(): void } = {
    openedAt: performance.now(),
    stalledSince: undefined,
    // Its slot freed now, for the stream that asks for it; its connection closed.
    end: () => {
      done();
      res.destroy();
    },
  };
  let stall: NodeJS.Timeout | undefined;
  /** Writes `text`; false when the client has not read it yet (then it has `stalledWriteMs` to). */
  const send = (text: string): boolean => {
    if (res.destroyed) return false;
    if (res.write(text)) return true;
    if (stream.stalledSince === undefined) {
      stream.stalledSince = performance.now();
      stall = setTimeout(() => res.destroy(), stalledWriteMs);
      stall.unref();
    }
    return false;
  };
  res.on("drain", () => {
    stream.stalledSince = undefined;
    clearTimeout(stall);
  });
  const write = (text: string) => {
    send(text);
    if (res.writableLength > maxBufferedBytes) res.destroy();
  };
  const listener = (message: TimelineMessage) => {
    if (res.destroyed) return;
    const text = frame(message, timeline.startedAt);
    if (!waiting) return write(text);
    waiting.push(text);
    waitingBytes += text.length;
    if (waitingBytes > maxBufferedBytes) res.destroy();
  };
  const streams = openStreams.get(timeline) ?? new Set();
  openStreams.set(timeline, streams);
  let unsubscribe = timeline.subscribe(listener);
  if (!unsubscribe) {
    // Every slot taken: the one a client has left unread longest, else the oldest, gives it up.
    const ended = streamToEnd(streams);
    ended?.end();
    unsubscribe = timeline.subscribe(listener);
  }
  if (!unsubscribe) {
    sendError(
      res,
      503,
      openAIError(
        "Too many event streams are open; retry later.",
        "service_unavailable_error",
        "too_many_streams",
      ),
      { "retry-after": "5" },
    );
    return;
  }
  res.writeHead(200, {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-accel-buffering": "no",
  });
  send("retry: 2000\n\n");
  send(
    frame(
      { type: "hello", data: { startedAt: new Date(timeline.startedAt).toISOString() } },
      timeline.startedAt,
    ),
  );
  const backlog = timeline.entries().filter((entry) => entry.seq > after);
  let next = 0;
  const pump = () => {
    while (next < backlog.length) {
      if (res.destroyed) return;
      // false: the client has not read what it was sent yet; the rest waits until it has.
      if (!send(frame({ type: "entry", entry: backlog[next++]! }, timeline.startedAt)))
        return void res.once("drain", pump);
    }
    const held = waiting ?? [];
    waiting = undefined;
    for (const text of held) write(text);
  };
  pump();
  // A comment keeps proxies from closing a quiet stream; while the backlog goes out it is not quiet.
  const ping = setInterval(() => {
    if (!waiting) write(": ping\n\n");
  }, keepAliveMs);
  ping.unref();
  streams.add(stream);
  const done = () => {
    clearInterval(ping);
    clearTimeout(stall);
    unsubscribe();
    streams.delete(stream);
    waiting = undefined;
  };
  req.once("close", done);
  res.once("close", done);
}
