/**
 * Whether a Model's new leader still waits for the activators' load: it knows none until their
 * next stats (every second), so for `settleMs` after taking the lead, or until the first stats
 * come, it says it is settling rather than report a demand of 0 (to KEDA: external-scaler.ts).
 *
 * Measured on the monotonic clock (`now`, default `performance.now()`): both times are taken in
 * this process. On the wall clock, a system clock set back after the lead was taken made every
 * later report look older than the lead: the leader said it was settling, and KEDA got
 * UNAVAILABLE for every metric of the Model, for as long as the step (found by an outside tester).
 */
export class LeaderSettling {
  readonly #settleMs: number;
  readonly #now: () => number;
  readonly #ledAt = new Map<string, number>();
  readonly #reportedAt = new Map<string, number>();

  constructor(settleMs: number, now: () => number = () => performance.now()) {
    this.#settleMs = settleMs;
    this.#now = now;
  }

  /** This replica took the lead of Model `key` now. */
  led(key: string): void {
    this.#ledAt.set(key, this.#now());
  }

  /** An activator's stats for Model `key` came now (its whole load). */
  reported(key: string): void {
    this.#reportedAt.set(key, this.#now());
  }

  settling(key: string): boolean {
    const led = this.#ledAt.get(key);
    if (led === undefined) return false;
    const reported = this.#reportedAt.get(key);
    return (reported === undefined || reported < led) && this.#now() - led < this.#settleMs;
  }

  /** The Model is gone: nothing of it is kept. */
  forget(key: string): void {
    this.#ledAt.delete(key);
    this.#reportedAt.delete(key);
  }
}
