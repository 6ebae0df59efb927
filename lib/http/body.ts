import type { IncomingMessage } from "node:http";

export class BodyTooLarge extends Error {
  readonly limit: number;
  constructor(limit: number) {
    super(`the request body is larger than the limit of ${limit} bytes`);
    this.limit = limit;
  }
}

/** A budget shared by many requests (`reserve` in readBody) said no. */
export class OverBudget extends Error {}

/**
 * How fast a body must keep arriving: at least `minBytes` (or its end) in every `windowMs` from the
 * start of the read. A window that brings less gives the read up (BodyStalled).
 */
export interface MinimumPace {
  windowMs: number;
  minBytes: number;
  /**
   * Bytes the current window brought so far, kept by readBody: a caller can tell whether the body,
   * should it stall now, is given up at this window's end or the next one's.
   */
  windowBytes?: number;
}

/**
 * What a body still arriving must bring in every window, at least (or its end), by default: a client
 * that sends less holds what it reserved, and its connection, without really uploading.
 */
export const bodyMinBytes = 1024;

/** The body stopped arriving, or trickled slower than its MinimumPace. */
export class BodyStalled extends Error {
  readonly pace: MinimumPace;
  /** Bytes of the body that came in all. */
  readonly received: number;
  constructor(pace: MinimumPace, received: number) {
    super(`less than ${pace.minBytes} bytes of the request body came in ${pace.windowMs / 1000}s`);
    this.pace = pace;
    this.received = received;
  }

  /** What the client is told (a 408 `request_timeout`). */
  get advice(): string {
    return `The request body stopped arriving: less than ${this.pace.minBytes} bytes of it came in ${this.pace.windowMs / 1000}s (bodyTimeout), ${this.received} bytes in all. Send the body without long pauses.`;
  }
}

/**
 * Node hands a body over one Buffer per chunk it came in: sent as 1-byte chunks (6 bytes on the wire
 * a byte), 1 MB of body was a million Buffers until it was whole, 500 MB of memory counted as 1 MB
 * against maxHeldBytes (found by an outside tester). Past the first `keptChunks`, chunks under
 * `smallChunk` bytes are copied into blocks of `blockBytes`; a body in a few chunks, as nearly every
 * one comes, is kept as it came.
 */
const keptChunks = 64;
const smallChunk = 4096;
const blockBytes = 64 * 1024;

/**
 * Reads the whole request body once, refusing early when it exceeds `limit`. `reserve(n)` is asked
 * for every `n` bytes as they arrive, before they are kept; when it answers false, no more bytes are
 * kept or reserved (what was reserved until then is the caller's to give back), but the rest of the
 * body is still read and counted: it fails with BodyTooLarge if it outgrows `limit` (it could never
 * be held), else with OverBudget at its end (it could be, later). Bytes are reserved
 * as received, never as declared: a client that declares a large Content-Length and sends nothing
 * holds nothing of a budget shared with others.
 *
 * Plain 'data'/'end' listeners, removed when done, rather than `for await`: Node's async iterator
 * leaves its end-of-stream listeners (five closures and their contexts) on the request after the
 * last chunk, and a held request keeps them for as long as it is held. A refusal stops keeping
 * bytes but does not destroy the request, so the answer (413, 503) still reaches the client; the
 * rest of the body is discarded as it arrives. `signal` gives up the read (its reason is the
 * rejection): for a caller that answered already, since Node then never ends the request.
 *
 * `pace` gives the read up (BodyStalled) when a window of it brings too little: a client that
 * declares a body and then sends nothing more, or one byte a second, would otherwise hold what it
 * reserved until Node's request timeout (5 minutes), and a few of them all of a budget shared with
 * others (found by an outside tester). A body refused, and read on only to learn its size, is paced
 * too.
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  reserve?: (bytes: number) => boolean,
  signal?: AbortSignal,
  pace?: MinimumPace,
): Promise<Buffer> {
  const header = req.headers["content-length"];
  const declared = header === undefined ? Number.NaN : Number(header);
  if (declared > limit) return Promise.reject(new BodyTooLarge(limit));
  return new Promise<Buffer>((resolve, reject) => {
    let chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    // The block small chunks are copied into: bytes up to `blockStart` are in `chunks` already.
    let block: Buffer | undefined;
    let blockStart = 0;
    let blockEnd = 0;
    const flush = () => {
      if (block && blockEnd > blockStart) chunks.push(block.subarray(blockStart, blockEnd));
      blockStart = blockEnd;
    };
    const keep = (chunk: Buffer) => {
      if (chunk.length >= smallChunk || chunks.length < keptChunks) {
        flush();
        chunks.push(chunk);
        return;
      }
      if (!block || blockEnd + chunk.length > block.length) {
        flush();
        block = Buffer.allocUnsafe(blockBytes);
        blockStart = blockEnd = 0;
      }
      blockEnd += chunk.copy(block, blockEnd);
    };
    if (pace) pace.windowBytes = 0;
    let paceTimer: NodeJS.Timeout | undefined;
    const checkPace = () => {
      if (pace!.windowBytes! < pace!.minBytes) return settle(new BodyStalled(pace!, size));
      pace!.windowBytes = 0;
      paceTimer = setTimeout(checkPace, pace!.windowMs);
    };
    const settle = (error: Error | undefined) => {
      clearTimeout(paceTimer);
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
      signal?.removeEventListener("abort", onAbort);
      if (error) return reject(error);
      flush();
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (pace) pace.windowBytes! += chunk.length;
      if (size > limit) return settle(new BodyTooLarge(limit));
      if (refused) return;
      if (reserve && !reserve(chunk.length)) {
        refused = true;
        chunks = [];
        block = undefined;
        return;
      }
      keep(chunk);
    };
    const onEnd = () => settle(refused ? new OverBudget() : undefined);
    const onError = (error: Error) => settle(error);
    // Closed before its end: the client went away mid-body.
    const onClose = () =>
      settle(
        Object.assign(new Error("the client closed the request before its body ended"), {
          code: "ECONNRESET",
        }),
      );
    const onAbort = () => settle(signal!.reason as Error);
    if (signal?.aborted) return onAbort();
    signal?.addEventListener("abort", onAbort);
    req.on("data", onData);
    req.on("end", onEnd);
    req.on("error", onError);
    req.on("close", onClose);
    if (pace && pace.windowMs > 0) paceTimer = setTimeout(checkPace, pace.windowMs);
  });
}
