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

/**
 * The event streams open at once, at most `max` (each is a connection and a listener that every
 * replica event is written to). A new stream always gets a slot: when all are taken, the one
 * `streamToEnd` picks is ended (`end` closes it and gives its slot back) and the new one takes it.
 */
export class StreamSlots<T extends OpenStream & { end(): void }> {
  readonly max: number;
  private readonly open = new Set<T>();

  constructor(max = 64) {
    this.max = max;
  }

  get size(): number {
    return this.open.size;
  }

  /** Gives `stream` a slot, ending another first if none is free; returns the slot's release. */
  take(stream: T): () => void {
    while (this.open.size >= this.max) {
      const ended = streamToEnd(this.open);
      if (!ended) break;
      // Its release may already have run (ending closes it); either way its slot is free now.
      this.open.delete(ended);
      ended.end();
    }
    this.open.add(stream);
    return () => this.open.delete(stream);
  }
}
