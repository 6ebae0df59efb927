const quote = 0x22;
const backslash = 0x5c;
const colon = 0x3a;
const openers = new Set([0x7b, 0x5b]); // { [
const closers = new Set([0x7d, 0x5d]); // } ]
const space = new Set([0x20, 0x09, 0x0a, 0x0d]);

/**
 * The JSON body with the value of its top-level `model` member set to `name`, every other byte as
 * the client sent it. Parsing and encoding the body again would change what the request asks for:
 * numbers a double cannot hold (a 63-bit `seed`, `1e999`), and JSON nested deeper than the encoder's
 * stack. The caller has parsed the body: it is valid JSON, an object whose `model` is a string.
 * With several `model` members the last is replaced, the one `JSON.parse` (and the engine) reads.
 * Undefined when there is no such member. Works on the bytes: every byte of a multi-byte UTF-8
 * character is above 0x7f, so none is taken for a quote or a bracket.
 */
export function replaceModel(body: Buffer, name: string): Buffer | undefined {
  let value: [number, number] | undefined;
  let depth = 0;
  let i = 0;
  while (i < body.length) {
    const byte = body[i]!;
    if (byte !== quote) {
      if (openers.has(byte)) depth++;
      else if (closers.has(byte)) depth--;
      i++;
      continue;
    }
    const start = i;
    i = afterString(body, i);
    // At the top level a string followed by a colon is a member's name.
    if (depth !== 1) continue;
    let next = skipSpace(body, i);
    if (body[next] !== colon || !isModelKey(body.subarray(start, i))) continue;
    next = skipSpace(body, next + 1);
    if (body[next] !== quote) continue;
    i = afterString(body, next);
    value = [next, i];
  }
  if (!value) return undefined;
  return Buffer.concat([
    body.subarray(0, value[0]),
    Buffer.from(JSON.stringify(name)),
    body.subarray(value[1]),
  ]);
}

/** The index after the string that opens at `at` (its closing quote included). */
function afterString(body: Buffer, at: number): number {
  let i = at + 1;
  while (i < body.length && body[i] !== quote) i += body[i] === backslash ? 2 : 1;
  return i + 1;
}

function skipSpace(body: Buffer, at: number): number {
  let i = at;
  while (i < body.length && space.has(body[i]!)) i++;
  return i;
}

/** Whether a member's quoted name is `model`, written plainly or with escapes (`"mod\u0065l"`). */
function isModelKey(quoted: Buffer): boolean {
  const raw = quoted.toString("utf8");
  return raw === '"model"' || (raw.includes("\\") && JSON.parse(raw) === "model");
}
