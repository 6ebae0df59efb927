import type { IncomingMessage, ServerResponse } from "node:http";
import { escapeLineBreakers } from "../lib/json-line.ts";
import { type OpenStream, StreamSlots } from "./stream-slots.ts";
import type { Timeline, TimelineMessage } from "./timeline.ts";

const keepAliveMs = 15_000;
/** A client this far behind on the event stream is cut off (it reconnects and reads the backlog). */
export const maxBufferedBytes = 1 << 20;
/**
 * A write the client has not read within this is the end of its stream: a reader that is there
 * takes a write in milliseconds (it reconnects and resumes if it was only slow); one that is not
 * held a slot forever (found by an outside tester, see activator/stream-slots.ts).
 */
export const stalledWriteMs = 10_000;

type Stream = OpenStream & { end(): void };

/** The open streams of each timeline, at most 64: a new one takes the slot of one that gives it up. */
const slotsOf = new WeakMap<Timeline, StreamSlots<Stream>>();

/** How many event streams of `timeline` are open. */
export function openStreams(timeline: Timeline): number {
  return slotsOf.get(timeline)?.size ?? 0;
}

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
  const stream: Stream = {
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
  let slots = slotsOf.get(timeline);
  if (!slots) {
    slots = new StreamSlots<Stream>();
    slotsOf.set(timeline, slots);
  }
  // Every slot taken: the one a client has left unread longest, else the oldest, gives it up.
  const release = slots.take(stream);
  const unsubscribe = timeline.subscribe(listener);
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
  const done = () => {
    clearInterval(ping);
    clearTimeout(stall);
    unsubscribe();
    release();
    waiting = undefined;
  };
  req.once("close", done);
  res.once("close", done);
}
