import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";

/** Headers that describe one connection, not the message: never forwarded (RFC 9110 §7.6.1). */
const hopByHop = new Set([
  "connection",
  "keep-alive",
  "proxy-authenticate",
  "proxy-authorization",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
  "host",
  "content-length",
  "snooze-model",
  // The activator reads the whole body before it forwards (and answered any 100-continue itself).
  "expect",
]);

/** Copies end-to-end headers, dropping hop-by-hop ones and those named in `Connection`. */
export function endToEnd(
  headers: IncomingHttpHeaders | Record<string, string | string[] | undefined>,
): OutgoingHttpHeaders {
  const named = String(headers.connection ?? "")
    .toLowerCase()
    .split(",")
    .map((h) => h.trim());
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || hopByHop.has(name) || named.includes(name)) continue;
    out[name] = value;
  }
  return out;
}
