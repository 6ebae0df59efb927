import type { Clock } from "../../lib/clock.ts";

interface Timer {
  at: number;
  /** Order of creation: timers due at the same moment run in the order they were set. */
  seq: number;
  fn: () => void;
  cancelled: boolean;
}

/**
 * A clock that moves only when a test says so. Timers run in time order (ties in the order they
 * were set), each with `now()` at its due time; a timer set by a timer while the clock advances
 * runs too if it falls within the window. Timers of "never" (Infinity) are accepted and never run.
 */
export class ManualClock implements Clock {
  private time: number;
  private seq = 0;
  private timers: Timer[] = [];

  constructor(start = Date.UTC(2025, 0, 1)) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): { cancel(): void } {
    if (Number.isNaN(ms) || ms === Number.POSITIVE_INFINITY) return { cancel() {} };
    const timer: Timer = { at: this.time + Math.max(0, ms), seq: this.seq++, fn, cancelled: false };
    this.timers.push(timer);
    return {
      cancel: () => {
        timer.cancelled = true;
        this.timers = this.timers.filter((t) => t !== timer);
      },
    };
  }

  /** Timers set and not yet run or cancelled. */
  get pending(): number {
    return this.timers.length;
  }

  /** When the next timer is due (Infinity when none is set). */
  nextAt(): number {
    return this.earliest()?.at ?? Number.POSITIVE_INFINITY;
  }

  /**
   * Moves the clock `ms` forward, running every timer due up to then in time order, synchronously:
   * promise chains the timers start do not run in between (see `advanceAndSettle`).
   */
  advance(ms: number): void {
    const until = this.time + ms;
    for (;;) {
      const next = this.earliest();
      if (!next || next.at > until) break;
      this.runDue(next);
    }
    this.time = until;
  }

  /** Flushes microtasks and promise chains: a few turns of the event loop, no real time waited. */
  async settle(turns = 2): Promise<void> {
    for (let i = 0; i < turns; i++) await new Promise<void>((resolve) => setImmediate(resolve));
  }

  /**
   * Moves the clock `ms` forward the way time really passes for async code: without `step`, from
   * timer to timer (each due timer runs, then promise chains settle before the next one); with
   * `step`, in steps of that size, settling after each. `onStep` runs after every settle, for
   * invariants that must hold at every tick.
   */
  async advanceAndSettle(ms: number, step?: number, onStep?: () => void): Promise<void> {
    const until = this.time + ms;
    let turns = 0;
    const spin = () => {
      if (++turns > 100_000) throw new Error("ManualClock: timers keep firing without time passing");
    };
    await this.settle();
    onStep?.();
    while (this.time < until) {
      spin();
      if (step !== undefined) this.advance(Math.min(step, until - this.time));
      else {
        const next = this.earliest();
        if (!next || next.at > until) this.time = until;
        else this.runDue(next);
      }
      await this.settle();
      onStep?.();
    }
    // Timers due exactly at the end that were set while settling.
    while (this.earliest() !== undefined && this.earliest()!.at <= until) {
      spin();
      this.runDue(this.earliest()!);
      await this.settle();
      onStep?.();
    }
  }

  private earliest(): Timer | undefined {
    let best: Timer | undefined;
    for (const t of this.timers)
      if (!best || t.at < best.at || (t.at === best.at && t.seq < best.seq)) best = t;
    return best;
  }

  private runDue(timer: Timer): void {
    this.timers = this.timers.filter((t) => t !== timer);
    if (timer.cancelled) return;
    this.time = Math.max(this.time, timer.at);
    timer.fn();
  }
}
