/**
 * Whether a browser's `Origin` header names this server as the request's `Host` header does (same
 * scheme-less host and port): a page of this server's own origin. `null` (a sandboxed frame, a
 * `file:` page) or anything that is not an http(s) origin is not.
 */
export function sameOrigin(origin: string, host: string | undefined): boolean {
  if (!host) return false;
  try {
    const from = new URL(origin);
    if (from.protocol !== "http:" && from.protocol !== "https:") return false;
    // The Host header normalised as the origin's scheme would (no default port).
    return from.host === new URL(`${from.protocol}//${host}`).host;
  } catch {
    return false;
  }
}
