/**
 * A JSON body's text, in the encodings vLLM reads (Python's `json.loads` of the bytes, RFC 8259
 * §8.1's detection): UTF-8, with or without a byte order mark, and UTF-16 in either byte order,
 * told by its mark or by the zero bytes of its first ASCII character. `utf8` says whether the bytes
 * were already plain UTF-8 (no mark), so they can be sent on as they are.
 */
export function jsonText(body: Buffer): { text: string; utf8: boolean } {
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf)
    return { text: body.toString("utf8", 3), utf8: false };
  const utf16 = utf16Order(body);
  if (utf16) return { text: new TextDecoder(utf16).decode(body), utf8: false };
  return { text: body.toString("utf8"), utf8: true };
}

/** UTF-16's byte order, if the body is UTF-16 (its mark is dropped by the decoder). */
function utf16Order(body: Buffer): "utf-16le" | "utf-16be" | undefined {
  if (body.length < 2) return undefined;
  const [a, b] = [body[0]!, body[1]!];
  // FF FE 00 00 is UTF-32's mark, which vLLM reads too but JavaScript cannot decode: left as UTF-8
  // (and refused as invalid JSON).
  if (a === 0xff && b === 0xfe) return body[2] === 0 && body[3] === 0 ? undefined : "utf-16le";
  if (a === 0xfe && b === 0xff) return "utf-16be";
  if (body.length < 4) return undefined;
  // JSON text starts with an ASCII character: in UTF-16 one of its two bytes is 0.
  if (a !== 0 && b === 0 && body[2] !== 0 && body[3] === 0) return "utf-16le";
  if (a === 0 && b !== 0 && body[2] === 0 && body[3] !== 0) return "utf-16be";
  return undefined;
}
