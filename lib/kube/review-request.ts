import type { KubeClient } from "./client.ts";

/**
 * How long the API server may take to answer a TokenReview or SubjectAccessReview. Below the 5 s an
 * activator waits for the autoscaler to take a report: with the client's own 30 s, a slow API server
 * held each caller until the caller gave up on its own, and it never heard why it was refused
 * (found by an outside tester). An API server that answers none in this time is as good as down to
 * a caller waiting on it; the refusal (503) says so.
 */
export const defaultReviewTimeoutMs = 4_000;

/**
 * Reviews one reviewer has under way at most. Each distinct token is a review of its own, and a
 * caller can make up any number of them: with an API server slow to answer, 200 made-up tokens were
 * 200 reviews waiting at once, and a flood as many as it sent (found by an outside tester). Callers
 * whose answer is cached never wait on one; past this, a new token is refused (503) at once.
 */
export const defaultMaxReviewsInFlight = 64;

export interface ReviewSenderOptions {
  reviewTimeoutMs?: number;
  maxReviewsInFlight?: number;
}

/** Creates reviews with one client: each with a deadline, and only so many at once. */
export class ReviewSender {
  private readonly client: KubeClient;
  private readonly timeoutMs: number;
  private readonly maxInFlight: number;
  private inFlight = 0;

  constructor(client: KubeClient, options: ReviewSenderOptions = {}) {
    this.client = client;
    this.timeoutMs = options.reviewTimeoutMs ?? defaultReviewTimeoutMs;
    this.maxInFlight = options.maxReviewsInFlight ?? defaultMaxReviewsInFlight;
  }

  /** Creates a review (`path`, `body`) and returns the API server's answer; a late answer, or no room, is an error saying so. */
  async send<T>(path: string, body: unknown): Promise<T> {
    if (this.inFlight >= this.maxInFlight)
      throw new Error(`${this.inFlight} reviews are already waiting on the API server, the most at once`);
    this.inFlight++;
    try {
      return await this.client.request<T>("POST", path, { body, timeoutMs: this.timeoutMs });
    } catch (error) {
      if ((error as Error).name === "TimeoutError")
        throw new Error(`the API server did not answer within ${this.timeoutMs / 1000}s`);
      throw error;
    } finally {
      this.inFlight--;
    }
  }
}
