import type { KubeClient } from "./client.ts";

/**
 * How long the API server may take to answer a TokenReview or SubjectAccessReview. Below the 5 s an
 * activator waits for the autoscaler to take a report: with the client's own 30 s, a slow API server
 * held each caller until the caller gave up on its own, and it never heard why it was refused
 * (found by an outside tester). An API server that answers none in this time is as good as down to
 * a caller waiting on it; the refusal (503) says so.
 */
export const defaultReviewTimeoutMs = 4_000;

/** Creates a review (`path`, `body`) and returns the API server's answer; a late answer is an error saying so. */
export async function sendReview<T>(
  client: KubeClient,
  path: string,
  body: unknown,
  timeoutMs = defaultReviewTimeoutMs,
): Promise<T> {
  try {
    return await client.request<T>("POST", path, { body, timeoutMs });
  } catch (error) {
    if ((error as Error).name === "TimeoutError")
      throw new Error(`the API server did not answer within ${timeoutMs / 1000}s`);
    throw error;
  }
}
