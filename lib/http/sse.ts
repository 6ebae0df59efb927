import type { ServerResponse } from "node:http";

/**
 * Ends an SSE stream with one last event and the `[DONE]` that OpenAI clients stop at: how an
 * error is told once the stream's 200 has gone out. An event's data must be one line here, so line
 * breaks in `data` (an engine's pretty-printed error) become spaces. A stream already ended or cut
 * is left alone.
 */
export function endWithEvent(res: ServerResponse, data: string): void {
  if (res.writableEnded || res.destroyed) return;
  res.end(`data: ${data.replaceAll("\n", " ")}\n\ndata: [DONE]\n\n`);
}

/**
 * An SSE event's part held back, at most, until its end comes: past it the engine's bytes go out as
 * they come (an engine that never ends its events must not grow the activator's memory).
 */
export const maxHeldEventBytes = 256 * 1024;

/**
 * Where the last complete SSE event of `chunk` ends (after its blank line), or 0. A blank line is
 * `\n\n`, `\r\n\r\n` or `\r\r`; an engine's read nearly always ends with one, checked first.
 */
export function eventsEnd(chunk: Buffer): number {
  const n = chunk.length;
  if (
    n >= 2 &&
    chunk[n - 1] === 0x0a &&
    (chunk[n - 2] === 0x0a || (chunk[n - 2] === 0x0d && chunk[n - 3] === 0x0a))
  )
    return n;
  if (n >= 2 && chunk[n - 1] === 0x0d && chunk[n - 2] === 0x0d) return n;
  const lf = chunk.lastIndexOf("\n\n");
  const crlf = chunk.lastIndexOf("\r\n\r\n");
  const cr = chunk.lastIndexOf("\r\r");
  return Math.max(lf < 0 ? 0 : lf + 2, crlf < 0 ? 0 : crlf + 4, cr < 0 ? 0 : cr + 2);
}

/** The `data: [DONE]` line OpenAI's streams end with (`data:[DONE]` too: the space is optional). */
const doneLine = /(?:^|[\r\n])data: ?\[DONE\](?=[\r\n])/;
const blankLine = /\r\n\r\n|\n\n|\r\r/g;

/**
 * Where the `data: [DONE]` event of `events` (whole events, as `eventsEnd` cuts them) ends, after
 * its blank line; -1 when there is none. After it an OpenAI stream is over: its clients stop there.
 */
export function doneEnd(events: Buffer): number {
  // Most reads carry no [DONE]: found without making a string of them.
  if (!events.includes("[DONE]")) return -1;
  const text = events.toString("latin1");
  const line = doneLine.exec(text);
  if (!line) return -1;
  blankLine.lastIndex = line.index + line[0].length;
  const blank = blankLine.exec(text);
  return blank ? blank.index + blank[0].length : -1;
}
