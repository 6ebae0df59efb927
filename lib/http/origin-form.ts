import type { IncomingMessage } from "node:http";

const absoluteForm = /^https?:\/\/([^/?#]*)(.*)$/is;

/**
 * Turns an absolute-form request target (`POST http://host/v1/completions`, which RFC 9112 §3.2.2
 * says a server must accept) into the origin form every route reads, and, as that section says, takes
 * the target's authority as the Host: the Host header of such a request is ignored. So routing by
 * Host, the loopback check of the admin API and the path checks see one request, not two stories.
 * The path is kept as written (not normalised by a URL parser), so it meets the same checks as any
 * other. False when the authority cannot be read or carries credentials (the caller answers 400).
 */
export function toOriginForm(req: IncomingMessage): boolean {
  const match = req.url === undefined ? null : absoluteForm.exec(req.url);
  if (!match) return true;
  const [, authority, rest] = match as unknown as [string, string, string];
  if (authority === "" || authority.includes("@")) return false;
  try {
    new URL(`http://${authority}/`);
  } catch {
    return false;
  }
  req.url = rest.startsWith("/") ? rest : `/${rest}`;
  req.headers.host = authority;
  return true;
}
