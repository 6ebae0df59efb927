import type { Clock } from "./clock.ts";

/**
 * A write of state others read (a pod's tier, a Model's or a Slot's status) that the API server
 * refused (throttled with 429, a 500, away a moment) is made again after 1 s, doubling up to 30 s,
 * until it goes through or what it says moves on. Dropped, it waited for the next change, which may
 * never come: a wake's `ready` refused once left the pod `waking` for good; a Slot's last swap
 * would stay unsaid while the slot sits still.
 */
const firstMs = 1_000;
const maxMs = 30_000;

/** The wait before try `attempt + 1`, after `attempt` tries that failed (1 → 1 s, 2 → 2 s, … 30 s). */
export function rewriteDelayMs(attempt: number): number {
  return Math.min(maxMs, firstMs * 2 ** (attempt - 1));
}

/**
 * One writer's retries: after each refused write, the next is made once its back-off is over (one
 * at a time); a write that goes through starts the back-off over.
 */
export class RewriteBackoff {
  private readonly clock: Clock;
  private failures = 0;
  private timer?: { cancel(): void };
  private dueAt = 0;

  constructor(clock: Clock) {
    this.clock = clock;
  }

  /** When the retry waiting for its back-off is made; undefined when none waits. */
  get retryAt(): number | undefined {
    return this.timer ? this.dueAt : undefined;
  }

  /** The write went through. */
  succeeded(): void {
    this.failures = 0;
    this.cancel();
  }

  /** The write was refused: `again` runs after the back-off (unless one is waiting already). Returns the wait. */
  failed(again: () => void): number {
    this.failures++;
    const delayMs = rewriteDelayMs(this.failures);
    if (!this.timer) {
      this.dueAt = this.clock.now() + delayMs;
      this.timer = this.clock.setTimeout(() => {
        this.timer = undefined;
        again();
      }, delayMs);
    }
    return delayMs;
  }

  /**
   * No retry waits, and the next refusal starts the back-off from 1 s (the writer stood down, and
   * what failed before was another leadership's).
   */
  reset(): void {
    this.failures = 0;
    this.cancel();
  }

  /** No more retries (the writer stands down). */
  cancel(): void {
    this.timer?.cancel();
    this.timer = undefined;
  }
}
