import { backgroundTimer, clearBackgroundTimer } from "./background-timer.ts";

/** Time as the decision logic sees it: injected, so tests can drive it. */
export interface Clock {
  now(): number;
  setTimeout(fn: () => void, ms: number): { cancel(): void };
}

export const systemClock: Clock = {
  now: () => Date.now(),
  setTimeout(fn, ms) {
    // Timers past ~24.8 days overflow Node's 32-bit delay; "never" settings are Infinity.
    if (!Number.isFinite(ms) || ms > 2 ** 31 - 1) return { cancel() {} };
    const timer = backgroundTimer(fn, Math.max(0, ms));
    return { cancel: () => clearBackgroundTimer(timer) };
  },
};
