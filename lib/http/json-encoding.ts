/**
 * A JSON body's text, in the encodings vLLM reads (Python's `json.loads` of the bytes, RFC 8259
 * §8.1's detection): UTF-8, with or without a byte order mark, and UTF-16 and UTF-32 in either
 * byte order, told by their mark or by the zero bytes of their first ASCII character. `utf8` says whether the bytes
 * were already plain UTF-8 (no mark), so they can be sent on as they are.
 */
export function jsonText(body: Buffer): { text: string; utf8: boolean } {
  if (body.length >= 3 && body[0] === 0xef && body[1] === 0xbb && body[2] === 0xbf)
    return { text: body.toString("utf8", 3), utf8: false };
  const utf32 = utf32Order(body);
  if (utf32) return { text: utf32Text(body, utf32), utf8: false };
  const utf16 = utf16Order(body);
  if (utf16) return { text: new TextDecoder(utf16).decode(body), utf8: false };
  return { text: body.toString("utf8"), utf8: true };
}

/** UTF-16's byte order, if the body is UTF-16 (its mark is dropped by the decoder). */
function utf16Order(body: Buffer): "utf-16le" | "utf-16be" | undefined {
  if (body.length < 2) return undefined;
  const [a, b] = [body[0]!, body[1]!];
  if (a === 0xff && b === 0xfe) return "utf-16le";
  if (a === 0xfe && b === 0xff) return "utf-16be";
  if (body.length < 4) return undefined;
  // JSON text starts with an ASCII character: in UTF-16 one of its two bytes is 0.
  if (a !== 0 && b === 0 && body[2] !== 0 && body[3] === 0) return "utf-16le";
  if (a === 0 && b !== 0 && body[2] === 0 && body[3] !== 0) return "utf-16be";
  return undefined;
}

/** UTF-32's byte order, if the body is UTF-32 (checked before UTF-16: FF FE 00 00 starts both). */
function utf32Order(body: Buffer): "le" | "be" | undefined {
  if (body.length < 4 || body.length % 4 !== 0) return undefined;
  const [a, b, c, d] = [body[0]!, body[1]!, body[2]!, body[3]!];
  if (c === 0 && d === 0 && ((a === 0xff && b === 0xfe) || (a !== 0 && b === 0))) return "le";
  if (a === 0 && b === 0 && ((c === 0xfe && d === 0xff) || (c === 0 && d !== 0))) return "be";
  return undefined;
}

/** UTF-32 text, its mark dropped; a code unit that is no character reads as U+FFFD (as JSON refuses it). */
function utf32Text(body: Buffer, order: "le" | "be"): string {
  const points: number[] = [];
  for (let at = 0; at < body.length; at += 4) {
    const point = order === "le" ? body.readUInt32LE(at) : body.readUInt32BE(at);
    if (at === 0 && point === 0xfeff) continue;
    points.push(point > 0x10ffff || (point >= 0xd800 && point <= 0xdfff) ? 0xfffd : point);
  }
  let text = "";
  // In slices: String.fromCodePoint takes its arguments on the stack.
  for (let at = 0; at < points.length; at += 8_192)
    text += String.fromCodePoint(...points.slice(at, at + 8_192));
  return text;
}
