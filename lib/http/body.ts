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
 * for every `n` bytes before they are kept; when it answers false, reading stops with OverBudget
 * (what was reserved until then is the caller's to give back). A declared Content-Length is read
 * into one buffer of that size, so a large body is not held twice while its chunks are joined.
 */
export async function readBody(
  req: IncomingMessage,
  limit: number,
  reserve?: (bytes: number) => boolean,
): Promise<Buffer> {
  const header = req.headers["content-length"];
  const declared = header === undefined ? Number.NaN : Number(header);
  if (declared > limit) throw new BodyTooLarge(limit);
  if (Number.isInteger(declared) && declared > 0 && !req.headers["transfer-encoding"]) {
    if (reserve && !reserve(declared)) throw new OverBudget();
    // Node's parser delivers exactly Content-Length bytes (or the request is aborted).
    const body = Buffer.allocUnsafe(declared);
    let size = 0;
    for await (const chunk of req as AsyncIterable<Buffer>) {
      if (size + chunk.length > declared) throw new BodyTooLarge(limit);
      chunk.copy(body, size);
      size += chunk.length;
    }
    return size === declared ? body : body.subarray(0, size);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge(limit);
    if (reserve && !reserve(chunk.length)) throw new OverBudget();
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}
