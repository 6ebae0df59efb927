import type { IncomingMessage } from "node:http";

export class BodyTooLarge extends Error {
  readonly limit: number;
  constructor(limit: number) {
    super(`the request body is larger than the limit of ${limit} bytes`);
    this.limit = limit;
  }
}

/** Reads the whole request body once, refusing early when it exceeds `limit`. */
export async function readBody(req: IncomingMessage, limit: number): Promise<Buffer> {
  const declared = Number(req.headers["content-length"]);
  if (declared > limit) throw new BodyTooLarge(limit);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limit) throw new BodyTooLarge(limit);
    chunks.push(chunk);
  }
  return chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, size);
}
