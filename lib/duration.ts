/** Durations in settings and flags are written like `250ms`, `30s`, `5m`, `1h30m`. */
const unitMs: Record<string, number> = { ms: 1, s: 1_000, m: 60_000, h: 3_600_000 };
const wholePattern = /^(?:\d+(?:\.\d+)?(?:ms|s|m|h))+$/;
const partPattern = /(\d+(?:\.\d+)?)(ms|s|m|h)/g;

/** Milliseconds in `text`, or undefined when it is not a duration. */
export function parseDuration(text: string): number | undefined {
  const trimmed = text.trim();
  if (trimmed === "0") return 0;
  if (!wholePattern.test(trimmed)) return undefined;
  let total = 0;
  for (const [, amount, unit] of trimmed.matchAll(partPattern)) total += Number(amount) * unitMs[unit!]!;
  return total;
}

/** A short human form: `850ms`, `2.5s`, `3m`, `1h5m`. */
export function formatDuration(ms: number): string {
  if (ms < 1_000) return `${Math.round(ms)}ms`;
  if (ms < 59_950) return `${Number((ms / 1_000).toFixed(1))}s`;
  // Whole seconds first, so 4m59.6s reads 5m, not 4m60s.
  const whole = Math.round(ms / 1_000);
  const hours = Math.floor(whole / 3_600);
  const minutes = Math.floor((whole % 3_600) / 60);
  const seconds = whole % 60;
  return `${hours ? `${hours}h` : ""}${minutes ? `${minutes}m` : ""}${seconds ? `${seconds}s` : ""}` || "0s";
}

/**
 * The longest delay a Node.js timer can wait: 2^31-1 ms (about 24.8 days). A longer one fires after
 * 1 ms instead (with a TimeoutOverflowWarning), so a duration that arms a timer stops there.
 */
export const maxTimerMs = 2 ** 31 - 1;
/** `maxTimerMs` as a refusal states it: exactly, in a form durations take (`596h` alone would suggest `596h1s` is refused). */
export const longestTimer = "596h31m23.647s (2^31-1 ms, about 24.8 days: the longest a timer waits)";

/**
 * A setting in ms to undici's form: 0 is none; `never` (Infinity) too. Timers above `maxTimerMs`
 * fire at once in Node (and undici), so a longer one is held to it.
 */
export const timerValue = (ms: number): number =>
  Number.isFinite(ms) && ms > 0 ? Math.min(ms, maxTimerMs) : 0;
