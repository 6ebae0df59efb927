/** Waiting in simulated time: every delay passes through the engine's `--time-scale`. */

import { maxTimerMs } from "../../lib/duration.ts";

export class AbortedError extends Error {
  constructor() {
    super("aborted");
    this.name = "AbortedError";
  }
}

/**
 * Resolves after `ms` of wall time, or rejects with AbortedError when `signal` aborts first. A delay
 * longer than one timer can wait (`--load-time 500h --time-scale 10`) is waited in several: a timer
 * past it fires after 1 ms (found by an outside tester: such an engine was up at once).
 */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(new AbortedError());
  return new Promise((resolve, reject) => {
    let timer: NodeJS.Timeout | undefined;
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError());
    };
    const wait = (left: number) => {
      timer = setTimeout(
        () => {
          if (left > maxTimerMs) return wait(left - maxTimerMs);
          signal?.removeEventListener("abort", onAbort);
          resolve();
        },
        Math.min(left, maxTimerMs),
      );
    };
    wait(ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * Resolves at `due` (a `performance.now()` time). Timers cannot wait less than
 * a millisecond, so a schedule of sub-millisecond steps (a small `--time-scale`)
 * runs late and then catches up: the average rate stays right.
 */
export function delayUntil(due: number, signal?: AbortSignal): Promise<void> {
  const ms = due - performance.now();
  if (ms >= 1) return delay(ms, signal);
  if (signal?.aborted) return Promise.reject(new AbortedError());
  return new Promise((resolve, reject) =>
    setImmediate(() => (signal?.aborted ? reject(new AbortedError()) : resolve())),
  );
}

/** A promise that never settles unless `signal` aborts: a hung engine. */
export function forever(signal?: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (signal?.aborted) reject(new AbortedError());
    signal?.addEventListener("abort", () => reject(new AbortedError()), { once: true });
  });
}
