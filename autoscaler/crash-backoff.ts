/**
 * **Pure**: how long a model's activations and restarts back off after failures. Activations that
 * failed in a row and engines that left on their own within `crashWindowMs` both count: from the
 * second one, 1 s doubling up to a minute. Apart from the controller, which keeps the counts and
 * the clock, so the rule is read and tested as the function of `now` it is.
 */
import { formatDuration } from "../lib/duration.ts";

/** How long an engine's leaving on its own counts towards a crash loop. */
export const crashWindowMs = 5 * 60_000;
const maxBackoffMs = 60_000;

/** The crashes that still count at `now`, with one more at `now`. */
export function withCrash(crashes: readonly number[], now: number): number[] {
  return [...crashes.filter((t) => now - t < crashWindowMs), now];
}

/** The back-off at `now` after `failures` failed activations in a row and these `crashes`. */
export function backoffMs(failures: number, crashes: readonly number[], now: number): number {
  const count = failures + crashes.filter((t) => now - t < crashWindowMs).length;
  return count <= 1 ? 0 : Math.min(maxBackoffMs, 1_000 * 2 ** (count - 2));
}

/** What the model's lastError says of a crash loop: why the last one left, how often, the back-off. */
export function crashLoopError(reason: string, crashes: number, backoff: number): string {
  return (
    `${reason}; its engine left on its own ${crashes} times within ` +
    `${formatDuration(crashWindowMs)}, so its restarts back off (${formatDuration(backoff)} after this one)`
  );
}
