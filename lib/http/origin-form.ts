import type { IncomingMessage } from "node:http";
import { clip } from "../clip.ts";

const absoluteForm = /^https?:\/\/([^/?#]*)(.*)$/is;
/** A target that begins with a URI scheme (RFC 3986 §3.1) is an absolute URL, of whatever scheme. */
const scheme = /^([a-z][a-z0-9+.-]*):/i;

/**
 * Turns an absolute-form request target (`POST http://host/v1/completions`, which RFC 9112 §3.2.2
 * says a server must accept) into the origin form every route reads, and, as that section says, takes
 * the target's authority as the Host: the Host header of such a request is ignored. So routing by
 * Host, the loopback check of the admin API and the path checks see one request, not two stories.
 * The path is kept as written (not normalised by a URL parser), so it meets the same checks as any
 * other. Undefined when the target is (now) in origin form, else what is wrong with it, for the
 * caller's 400: an absolute URL of another scheme than http(s) (`ftp://host/v1/...` names no
 * resource of this server), an authority that cannot be read, or one with credentials; and `*`
 * but in `OPTIONS *`.
 */
export function toOriginForm(req: IncomingMessage): string | undefined {
  if (req.url === undefined || req.url.startsWith("/")) return undefined;
  // RFC 9112 §3.2.4: the asterisk form names the server itself, and only OPTIONS takes it (the
  // caller answers `OPTIONS *`). Found by an outside tester: both were told "No route for GET *".
  if (req.url === "*")
    return req.method === "OPTIONS" ? undefined : "is `*` (the asterisk form), which only OPTIONS takes";
  const match = absoluteForm.exec(req.url);
  if (!match) {
    const other = scheme.exec(req.url)?.[1];
    return other === undefined
      ? undefined
      : `is an absolute URL with the scheme \`${clip(other, 40)}\`: Snooze serves http and https URLs only`;
  }
  const [, authority, rest] = match as unknown as [string, string, string];
  if (authority.includes("@")) return "is an absolute URL with credentials in its authority";
  if (authority === "") return "is an absolute URL without a host";
  try {
    new URL(`http://${authority}/`);
  } catch {
    return "is an absolute URL whose authority (host and port) cannot be read";
  }
  req.url = rest.startsWith("/") ? rest : `/${rest}`;
  req.headers.host = authority;
  return undefined;
}
