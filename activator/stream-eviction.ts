/** What the event stream's slot keeper knows of one open stream. */
export interface OpenStream {
  /** When it opened (ms, any monotonic clock). */
  openedAt: number;
  /** Since when its writes wait for the client to read (Node holds them), if they do. */
  stalledSince: number | undefined;
}

/**
 * **Pure**: the stream that gives its slot to a new one when every slot is taken: the one whose
 * client has left writes unread longest, else the oldest. Found by an outside tester: 64 clients
 * that opened the stream and never read held every slot, and the page could connect no more (a
 * client that does not read may not look stalled: the kernel's socket buffers take a quiet
 * stream's few bytes for hours). A reader that is there and loses its slot reconnects (the stream's
 * `retry`) and resumes from its last event; one that is not frees it for good.
 */
export function streamToEnd<T extends OpenStream>(streams: Iterable<T>): T | undefined {
  let chosen: T | undefined;
  for (const stream of streams) {
    if (chosen === undefined) chosen = stream;
    else if (stream.stalledSince !== undefined)
      chosen =
        chosen.stalledSince === undefined || stream.stalledSince < chosen.stalledSince ? stream : chosen;
    else if (chosen.stalledSince === undefined && stream.openedAt < chosen.openedAt) chosen = stream;
  }
  return chosen;
}
