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
 */
export function readBody(
  req: IncomingMessage,
  limit: number,
  reserve?: (bytes: number) => boolean,
  signal?: AbortSignal,
): Promise<Buffer> {
  const header = req.headers["content-length"];
  const declared = header === undefined ? Number.NaN : Number(header);
  if (declared > limit) return Promise.reject(new BodyTooLarge(limit));
  return new Promise<Buffer>((resolve, reject) => {
    let chunks: Buffer[] = [];
    let size = 0;
    let refused = false;
    const settle = (error: Error | undefined) => {
      req.off("data", onData);
      req.off("end", onEnd);
      req.off("error", onError);
      req.off("close", onClose);
      signal?.removeEventListener("abort", onAbort);
      if (error) return reject(error);
      resolve(chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size));
    };
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) return settle(new BodyTooLarge(limit));
      if (refused) return;
      if (reserve && !reserve(chunk.length)) {
        refused = true;
        chunks = [];
        return;
      }
      chunks.push(chunk);
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
  });
}
