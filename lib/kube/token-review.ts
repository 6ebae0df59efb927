import { createHash } from "node:crypto";
import type { KubeClient } from "./client.ts";

/** The username Kubernetes gives a ServiceAccount's tokens. */
export const serviceAccountUser = (namespace: string, name: string) =>
  `system:serviceaccount:${namespace}:${name}`;

export const tokenReviewsPath = "/apis/authentication.k8s.io/v1/tokenreviews";

/** What the API server said of a token (the part of a TokenReview's status Snooze reads). */
interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string };
  error?: string;
}

/** Who a caller is, or why it is refused: 401 not authenticated, 403 not allowed, 503 cannot tell now. */
export type CallerCheck =
  | { ok: true; username: string }
  | { ok: false; status: 401 | 403 | 503; message: string };

export interface TokenReviewerOptions {
  /** Usernames that may call (`system:serviceaccount:NS:NAME`). */
  allowed: Iterable<string>;
  /** How long an accepted token is trusted without asking again (a refused one: at most 10 s). */
  cacheMs?: number;
  /** Tokens remembered at most; the oldest goes first. */
  maxEntries?: number;
  now?: () => number;
}

interface Cached {
  check: CallerCheck;
  expires: number;
}

/**
 * Authenticates callers by their Kubernetes bearer token: a TokenReview asks the API server whose
 * token it is (the reviewer needs `create` on tokenreviews.authentication.k8s.io), and only the
 * allowed usernames pass. Accepted tokens are cached for a minute by the token's hash (bounded),
 * so an activator's stats every second cost one review a minute, and refused ones for 10 s, so
 * a caller with a bad token cannot make the API server review every request; a review the API
 * server could not answer is not cached, and it refuses (503), never lets through.
 */
export class TokenReviewer {
  private readonly client: KubeClient;
  readonly allowed: ReadonlySet<string>;
  private readonly cacheMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly cache = new Map<string, Cached>();
  private readonly pending = new Map<string, Promise<CallerCheck>>();
  /** TokenReviews sent, for tests and the state endpoint. */
  reviews = 0;

  constructor(client: KubeClient, options: TokenReviewerOptions) {
    this.client = client;
    this.allowed = new Set(options.allowed);
    this.cacheMs = options.cacheMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /** Who holds `token` and whether they may call; undefined `token` (no Authorization header): 401. */
  async check(token: string | undefined): Promise<CallerCheck> {
    if (token === undefined)
      return {
        ok: false,
        status: 401,
        message: "send the caller's ServiceAccount token as Authorization: Bearer <token>",
      };
    const key = createHash("sha256").update(token).digest("base64url");
    const cached = this.cache.get(key);
    if (cached && cached.expires > this.now()) return cached.check;
    if (cached) this.cache.delete(key);
    let review = this.pending.get(key);
    if (!review) {
      review = this.review(token, key).finally(() => this.pending.delete(key));
      this.pending.set(key, review);
    }
    return review;
  }

  private async review(token: string, key: string): Promise<CallerCheck> {
    this.reviews++;
    let status: TokenReviewStatus | undefined;
    try {
      const answer = await this.client.create<{ status?: TokenReviewStatus }>(tokenReviewsPath, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token },
      });
      status = answer?.status;
    } catch (error) {
      return {
        ok: false,
        status: 503,
        message: `cannot check the caller's token now: ${(error as Error).message}`,
      };
    }
    const username = status?.user?.username;
    let check: CallerCheck;
    if (!status?.authenticated || !username)
      check = {
        ok: false,
        status: 401,
        message: `the token is not valid${status?.error ? `: ${status.error}` : ""}`,
      };
    else if (!this.allowed.has(username))
      check = {
        ok: false,
        status: 403,
        message: `${username} may not call the autoscaler (allowed: ${[...this.allowed].join(", ")})`,
      };
    else check = { ok: true, username };
    this.remember(key, check);
    return check;
  }

  private remember(key: string, check: CallerCheck): void {
    while (this.cache.size >= this.maxEntries) {
      const oldest = this.cache.keys().next().value;
      if (oldest === undefined) break;
      this.cache.delete(oldest);
    }
    // A refusal is kept shorter: a token minted a moment ago may only be valid in a few seconds.
    const ms = check.ok ? this.cacheMs : Math.min(this.cacheMs, 10_000);
    this.cache.set(key, { check, expires: this.now() + ms });
  }
}
