import type { IncomingHttpHeaders } from "node:http";

/** The token of an `Authorization: Bearer <token>` header, or undefined when there is none. */
export function bearerToken(headers: IncomingHttpHeaders): string | undefined {
  const value = headers.authorization;
  if (typeof value !== "string") return undefined;
  const match = /^Bearer[ \t]+(\S+)[ \t]*$/i.exec(value);
  return match?.[1];
}

/**
 * Whether `given` equals `expected`, in time that depends on neither: both are hashed to the same
 * length first, so neither the first differing byte nor the length shows in the timing.
 */
export function sameSecret(given: string, expected: string): boolean {
  // node:crypto at the first check, not at start: an idle `snooze serve` needs none of it (issue 14).
  const { createHash, timingSafeEqual } = process.getBuiltinModule("node:crypto");
  const digest = (text: string) => createHash("sha256").update(text, "utf8").digest();
  return timingSafeEqual(digest(given), digest(expected));
}
