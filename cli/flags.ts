import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { formatDuration, longestTimer, maxTimerMs, parseDuration } from "../lib/duration.ts";

/** `--host` and `--port` as every server command takes them. */
export function listenFlags(defaultPort: number): Record<"host" | "port", Flag> {
  return {
    host: { type: "string", default: "127.0.0.1", description: "address to listen on" },
    port: {
      type: "string",
      short: "p",
      default: String(defaultPort),
      description: "port to listen on (0: any free port)",
    },
  };
}

/**
 * The value of a port flag, or a usage error naming it: decimal digits only, 1 to 65535, or 0 for
 * any free port. `Number()` alone took `0x4650` (port 18000), `1e4` and `" 18104"` (found by an
 * outside tester).
 */
export function portValue(values: FlagValues, name = "port"): number {
  const text = String(values[name]);
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port <= 65_535)) {
    throw new UsageError(
      `--${name} must be a port number, 1 to 65535 in decimal digits (0: any free port), not "${text}"`,
    );
  }
  return port;
}

/**
 * The value of a duration flag in ms, or a usage error naming it: every command's duration flags
 * (and `snooze sim`'s) are read here. `positive` refuses 0, `atLeastMs` anything shorter. A duration
 * arms a timer, so it may be no longer than a timer waits (`maxTimerMs`, as in the settings file: a
 * longer timer fires after 1 ms); `timer: false` lifts that for one that is only written down, such
 * as a certificate's lifetime.
 */
export function durationValue(
  values: FlagValues,
  name: string,
  {
    positive = false,
    atLeastMs = 0,
    timer = true,
  }: { positive?: boolean; atLeastMs?: number; timer?: boolean } = {},
): number {
  const text = String(values[name]);
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new UsageError(`--${name} must be a duration like 250ms, 30s, 5m or 1h30m, not "${text}"`);
  if (timer && ms > maxTimerMs)
    throw new UsageError(`--${name} is too long: at most ${longestTimer}, not "${text}"`);
  if (positive && ms <= 0) throw new UsageError(`--${name} must be longer than 0, not "${text}"`);
  // A timer waits whole milliseconds: less than one would be no time at all.
  if (positive && ms < 1) throw new UsageError(`--${name} must be at least 1ms, not "${text}"`);
  if (ms < atLeastMs)
    throw new UsageError(`--${name} must be at least ${formatDuration(atLeastMs)}, not "${text}"`);
  return ms;
}
