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
  const named = connectionNames(headers.connection);
  const out: OutgoingHttpHeaders = {};
  for (const name in headers) {
    const value = headers[name];
    if (value === undefined || hopByHop.has(name) || named?.has(name)) continue;
    out[name] = value;
  }
  return out;
}

/**
 * The header names a `Connection` header lists. Its usual values (`keep-alive`, `close`) name
 * nothing that is not hop-by-hop already: they are not split on every request.
 */
function connectionNames(connection: string | string[] | undefined): Set<string> | undefined {
  if (connection === undefined) return undefined;
  const value = String(connection).toLowerCase();
  if (value === "keep-alive" || value === "close") return undefined;
  return new Set(value.split(",").map((h) => h.trim()));
}
