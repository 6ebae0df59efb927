import { clip } from "../clip.ts";
import type { KubeClient } from "./client.ts";
import { ReviewCache, type ReviewCacheOptions } from "./review-cache.ts";
import { ReviewSender } from "./review-request.ts";

/** The username Kubernetes gives a ServiceAccount's tokens. */
export const serviceAccountUser = (namespace: string, name: string) =>
  `system:serviceaccount:${namespace}:${name}`;

export const tokenReviewsPath = "/apis/authentication.k8s.io/v1/tokenreviews";

/** What the API server said of a token (the part of a TokenReview's status Snooze reads). */
interface TokenReviewStatus {
  authenticated?: boolean;
  user?: { username?: string; groups?: string[] };
  error?: string;
}

/** Who a caller is, or why it is refused: 401 not authenticated, 403 not allowed, 503 cannot tell now. */
export type CallerCheck =
  | { ok: true; username: string; groups?: string[] }
  | { ok: false; status: 401 | 403 | 503; message: string };

export interface TokenReviewerOptions extends ReviewCacheOptions {
  /** Usernames that may call (`system:serviceaccount:NS:NAME`); absent, anyone the token is valid for. */
  allowed?: Iterable<string>;
  /**
   * The audiences the token must be issued for (a TokenReview's `spec.audiences`); absent, the API
   * server's own. A token for another audience is not valid (401).
   */
  audiences?: string[];
}

/**
 * Authenticates callers by their Kubernetes bearer token: a TokenReview asks the API server whose
 * token it is (the reviewer needs `create` on tokenreviews.authentication.k8s.io), and only the
 * allowed usernames pass. Answers are cached (review-cache.ts), so an activator's stats every
 * second cost one review a minute; a review the API server could not answer is not cached, and it
 * refuses (503), never lets through.
 */
export class TokenReviewer {
  readonly allowed: ReadonlySet<string> | undefined;
  private readonly audiences: string[] | undefined;
  private readonly cache: ReviewCache<CallerCheck>;
  private readonly sender: ReviewSender;
  /** TokenReviews sent, for tests and the state endpoint. */
  reviews = 0;

  constructor(client: KubeClient, options: TokenReviewerOptions = {}) {
    this.allowed = options.allowed ? new Set(options.allowed) : undefined;
    this.audiences = options.audiences;
    this.cache = new ReviewCache(options);
    this.sender = new ReviewSender(client, options);
  }

  /** Who holds `token` and whether they may call; undefined `token` (no Authorization header): 401. */
  async check(token: string | undefined): Promise<CallerCheck> {
    if (token === undefined)
      return {
        ok: false,
        status: 401,
        message: "send the caller's ServiceAccount token as Authorization: Bearer <token>",
      };
    return this.cache.answer(
      token,
      () => this.review(token),
      (check) => check.ok || check.status !== 503,
    );
  }

  private async review(token: string): Promise<CallerCheck> {
    this.reviews++;
    let status: TokenReviewStatus | undefined;
    try {
      const answer = await this.sender.send<{ status?: TokenReviewStatus }>(tokenReviewsPath, {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenReview",
        spec: { token, ...(this.audiences ? { audiences: this.audiences } : {}) },
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
    if (!status?.authenticated || !username)
      return {
        ok: false,
        status: 401,
        // The API server's words, by their start: a token webhook behind it may say a lot.
        message: `the token is not valid${status?.error ? `: ${clip(String(status.error))}` : ""}`,
      };
    if (this.allowed && !this.allowed.has(username))
      return {
        ok: false,
        status: 403,
        message: `${username} may not call the autoscaler (allowed: ${[...this.allowed].join(", ")})`,
      };
    return { ok: true, username, groups: status.user?.groups ?? [] };
  }
}
