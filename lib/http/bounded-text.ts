/** An answer's body outgrew what its reader takes. */
export class AnswerTooLarge extends Error {
  constructor(maxBytes: number) {
    super(`the answer is larger than ${maxBytes} bytes`);
  }
}

/**
 * A response body as UTF-8 text, read no further than `maxBytes` (else AnswerTooLarge, the rest left
 * unread and the body destroyed): undici's `body.text()` reads whatever comes until the call's
 * deadline, gigabytes from a peer on the same host.
 */
export async function boundedText(body: AsyncIterable<Uint8Array>, maxBytes: number): Promise<string> {
  const parts: Uint8Array[] = [];
  let size = 0;
  // Throwing inside the loop ends the iteration, which destroys the stream.
  for await (const chunk of body) {
    size += chunk.byteLength;
    if (size > maxBytes) throw new AnswerTooLarge(maxBytes);
    parts.push(chunk);
  }
  return Buffer.concat(parts, size).toString("utf8");
}
