import type { IncomingHttpHeaders } from "node:http";

/**
 * Attribute values in `ce-*` headers, as the CloudEvents HTTP binding (§3.1.3.2) writes them: a
 * space, `"`, `%` and anything outside printable ASCII go as percent-encoded UTF-8. The Python SDK
 * and Go's sdk do so; the JavaScript SDK does not, in either direction, so Snooze does it around
 * the SDK: a model named `ünïcödé` sent by the Python SDK was looked up as
 * `%C3%BCn%C3%AFc%C3%B6d%C3%A9` and not found (found by an outside tester), and a model whose name
 * is outside Latin-1 could not be named in an outgoing event's `ce-subject` at all.
 */
export function encodeHeaderValue(value: string): string {
  let out = "";
  for (const char of value) {
    const code = char.codePointAt(0)!;
    if (code >= 0x21 && code <= 0x7e && char !== '"' && char !== "%") out += char;
    else
      for (const byte of Buffer.from(char, "utf8"))
        out += `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}

const utf8 = new TextDecoder("utf-8", { fatal: true });

/**
 * A `ce-*` header's attribute value: a quoted string unquoted (older senders), then one round of
 * percent-decoding. Undefined when the decoded bytes are not UTF-8 (the binding says to refuse
 * them: `%C0%A0` is an overlong space). A `%` without two hex digits after it is kept as it is.
 */
export function decodeHeaderValue(value: string): string | undefined {
  const unquoted = value.length >= 2 && value.startsWith('"') && value.endsWith('"') ? unquote(value) : value;
  const text = fromWire(unquoted);
  if (!text.includes("%")) return text;
  const bytes: number[] = [];
  for (let i = 0; i < text.length; i++) {
    const hex = text[i] === "%" ? text.slice(i + 1, i + 3) : "";
    if (/^[0-9A-Fa-f]{2}$/.test(hex)) {
      bytes.push(Number.parseInt(hex, 16));
      i += 2;
    } else bytes.push(...Buffer.from(text[i]!, "utf8"));
  }
  try {
    return utf8.decode(new Uint8Array(bytes));
  } catch {
    return undefined;
  }
}

/**
 * Node reads header bytes as Latin-1. A sender that wrote UTF-8 bytes unencoded (against the
 * binding, but some do) meant UTF-8: `模型` must not become `æ¨¡å` (found by an outside tester).
 * Bytes that are not UTF-8 stay Latin-1, which is what the JavaScript SDK sends for `café`.
 */
function fromWire(value: string): string {
  if (!/[\u0080-\u00ff]/.test(value)) return value;
  try {
    return utf8.decode(Buffer.from(value, "latin1"));
  } catch {
    return value;
  }
}

/** RFC 9110 §5.6.4: a quoted string's backslash escapes taken out. */
function unquote(quoted: string): string {
  return quoted.slice(1, -1).replace(/\\(.)/g, "$1");
}

/** Every `ce-*` header decoded; or the first whose value is not UTF-8. */
export function decodeAttributeHeaders(
  headers: IncomingHttpHeaders,
): { ok: true; headers: IncomingHttpHeaders } | { ok: false; header: string } {
  const decoded: IncomingHttpHeaders = { ...headers };
  for (const [name, value] of Object.entries(headers)) {
    if (!name.startsWith("ce-") || typeof value !== "string") continue;
    const text = decodeHeaderValue(value);
    if (text === undefined) return { ok: false, header: name };
    decoded[name] = text;
  }
  return { ok: true, headers: decoded };
}

/** A binary-mode message's `ce-*` headers percent-encoded, for the wire. */
export function encodeAttributeHeaders(headers: Record<string, string>): Record<string, string> {
  const encoded: Record<string, string> = {};
  for (const [name, value] of Object.entries(headers))
    encoded[name] = name.toLowerCase().startsWith("ce-") ? encodeHeaderValue(String(value)) : value;
  return encoded;
}

/**
 * The first `ce-*` header a message sends more than once (lowercase), from its raw header list.
 * Node joins repeats with ", ", so two `ce-subject` headers read as one model named `qwen, llama`,
 * and two `ce-specversion: 1.0` as the version `1.0, 1.0`: an attribute has one value.
 */
export function repeatedAttributeHeader(rawHeaders: readonly string[]): string | undefined {
  const seen = new Set<string>();
  for (let i = 0; i < rawHeaders.length; i += 2) {
    const name = rawHeaders[i]!.toLowerCase();
    if (!name.startsWith("ce-")) continue;
    if (seen.has(name)) return name;
    seen.add(name);
  }
  return undefined;
}
