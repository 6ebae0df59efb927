import { type Clock, systemClock } from "./clock.ts";

/**
 * How many lines of one kind the log takes before it counts the rest instead: a warning that a
 * client or a broken engine can cause at will (`engine call failed` for each request to an engine
 * that breaks its answers) wrote a line per request, as fast as requests came (found by an outside
 * tester). The first `lines` of a kind in an `intervalMs` are written, the rest counted and told in
 * one line when that interval ends, so a flood costs a few lines a minute, and nothing is lost but
 * the repeats: never the first of a kind.
 */
export interface LogLimit {
  lines: number;
  intervalMs: number;
  /**
   * How many kinds are counted at once: kinds are keyed by message and model, and a model's id can
   * come from what a client sends. Past it, new kinds share one count (see `LogLimiter.admit`).
   */
  kinds: number;
}

export const defaultLogLimit: LogLimit = { lines: 10, intervalMs: 60_000, kinds: 1_000 };

/** One kind's interval: from its first line, how many were written and how many held back. */
interface Interval {
  start: number;
  written: number;
  suppressed: number;
  /** Writes the summary of what was held back (the last suppressed line's, so its fields). */
  tell?: (suppressed: number, mixed: boolean) => void;
  timer?: { cancel(): void };
}

/** The kind every new one shares while `kinds` are being counted. */
const overflow = "\0other kinds";

export class LogLimiter {
  readonly limit: LogLimit;
  private readonly clock: Clock;
  private readonly intervals = new Map<string, Interval>();

  constructor(clock: Clock = systemClock, limit: LogLimit = defaultLogLimit) {
    this.clock = clock;
    this.limit = limit;
  }

  /**
   * Whether a line of this kind is written now. When it is not, it is counted, and `tell` is called
   * with the count once the kind's interval ends (on the clock's timer, not at the next line: a
   * flood that stops is still told). `mixed`: the count is of the kinds that came while `kinds`
   * others were counted, not of this one alone.
   */
  admit(kind: string, tell: (suppressed: number, mixed: boolean) => void): boolean {
    const now = this.clock.now();
    let key = kind;
    let interval = this.current(key, now);
    if (!interval && this.intervals.size >= this.limit.kinds) {
      this.forgetEnded(now);
      if (this.intervals.size >= this.limit.kinds) {
        key = overflow;
        interval = this.current(key, now);
      }
    }
    if (!interval) {
      interval = { start: now, written: 0, suppressed: 0 };
      this.intervals.set(key, interval);
    }
    if (interval.written < this.limit.lines) {
      interval.written++;
      return true;
    }
    interval.suppressed++;
    interval.tell = tell;
    interval.timer ??= this.clock.setTimeout(
      () => this.end(key, interval),
      interval.start + this.limit.intervalMs - now,
    );
    return false;
  }

  /** The kind's interval if it has not ended by `now` (one that has is ended first). */
  private current(key: string, now: number): Interval | undefined {
    const interval = this.intervals.get(key);
    if (!interval) return undefined;
    if (now - interval.start < this.limit.intervalMs) return interval;
    this.end(key, interval);
    return undefined;
  }

  private end(key: string, interval: Interval): void {
    if (this.intervals.get(key) === interval) this.intervals.delete(key);
    interval.timer?.cancel();
    interval.timer = undefined;
    const { suppressed, tell } = interval;
    interval.suppressed = 0;
    if (suppressed > 0) tell?.(suppressed, key === overflow);
  }

  private forgetEnded(now: number): void {
    for (const [key, interval] of this.intervals)
      if (now - interval.start >= this.limit.intervalMs) this.end(key, interval);
  }
}
