import { createHash } from "node:crypto";
import { keepNewest } from "../keep-newest.ts";

export interface ReviewCacheOptions {
  /** How long an answer that lets the caller through is kept. */
  cacheMs?: number;
  /** Answers remembered at most, of each kind (letting through, refusing); the oldest goes first. */
  maxEntries?: number;
  now?: () => number;
  /** How long the API server may take to answer one review (default: review-request.ts). */
  reviewTimeoutMs?: number;
  /** Reviews under way at once at most (default: review-request.ts). */
  maxReviewsInFlight?: number;
}

/** The part of a review's answer the cache reads: whether it lets the caller through. */
interface Answer {
  ok: boolean;
}

/**
 * The API server's answers to reviews (TokenReview, SubjectAccessReview), by what was asked. A yes
 * is kept `cacheMs` (a minute), so a busy caller costs one review a minute; a no at most 10 s, so a
 * caller with a bad token or no permission cannot make the API server review every request, while
 * a token minted or a Role bound a moment ago passes soon. Callers asking the same thing at once
 * share one review. Bounded: past `maxEntries` the oldest answer goes, counted apart for yeses and
 * noes, so that a caller sending thousands of made-up tokens pushes out only noes, never the yeses
 * of the callers that belong (with one count it pushed them all out, and each of their next
 * requests waited on a review again). What is asked is kept only as its SHA-256 (a token is a
 * secret).
 */
export class ReviewCache<T extends Answer> {
  private readonly cacheMs: number;
  private readonly maxEntries: number;
  private readonly now: () => number;
  private readonly yeses = new Map<string, { answer: T; expires: number }>();
  private readonly noes = new Map<string, { answer: T; expires: number }>();
  private readonly pending = new Map<string, Promise<T>>();

  constructor(options: ReviewCacheOptions = {}) {
    this.cacheMs = options.cacheMs ?? 60_000;
    this.maxEntries = options.maxEntries ?? 1_000;
    this.now = options.now ?? Date.now;
  }

  /**
   * The answer to `question`: remembered, or what `review` says (asked once however many wait for
   * it), remembered unless `keep` says not (an answer that only says the API server could not tell).
   */
  answer(question: string, review: () => Promise<T>, keep: (answer: T) => boolean): Promise<T> {
    const key = createHash("sha256").update(question).digest("base64url");
    const cached = this.yeses.get(key) ?? this.noes.get(key);
    if (cached && cached.expires > this.now()) return Promise.resolve(cached.answer);
    if (cached) {
      this.yeses.delete(key);
      this.noes.delete(key);
    }
    let asked = this.pending.get(key);
    if (!asked) {
      asked = review()
        .then((answer) => {
          if (keep(answer)) this.remember(key, answer);
          return answer;
        })
        .finally(() => this.pending.delete(key));
      this.pending.set(key, asked);
    }
    return asked;
  }

  private remember(key: string, answer: T): void {
    const ms = answer.ok ? this.cacheMs : Math.min(this.cacheMs, 10_000);
    // A key has one answer: the newest, in the map of its kind.
    (answer.ok ? this.noes : this.yeses).delete(key);
    keepNewest(
      answer.ok ? this.yeses : this.noes,
      key,
      { answer, expires: this.now() + ms },
      this.maxEntries,
    );
  }
}
