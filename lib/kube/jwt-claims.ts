/** The claims of a JWT that say whom it is for and until when (RFC 7519 §4.1). */
export interface AudienceClaims {
  /** `aud`, always as a list. */
  audiences: string[];
  /** `exp`, in ms since the epoch; undefined when the token has none. */
  expiresAt?: number;
}

/**
 * The audience and expiry a JWT claims, read without checking its signature: what a token says of
 * itself, good only to turn away at once a token that cannot be valid for a use (not a JWT, for
 * another audience, expired) before the API server is asked whether it is valid at all. Undefined
 * when `token` is not a JWT with a JSON payload.
 */
export function audienceClaims(token: string): AudienceClaims | undefined {
  const parts = token.split(".");
  if (parts.length !== 3 || !parts[1]) return undefined;
  let payload: unknown;
  try {
    payload = JSON.parse(Buffer.from(parts[1], "base64url").toString("utf8"));
  } catch {
    return undefined;
  }
  if (typeof payload !== "object" || payload === null) return undefined;
  const { aud, exp } = payload as { aud?: unknown; exp?: unknown };
  const audiences =
    typeof aud === "string" ? [aud] : Array.isArray(aud) ? aud.filter((a) => typeof a === "string") : [];
  return { audiences, ...(typeof exp === "number" ? { expiresAt: exp * 1_000 } : {}) };
}
