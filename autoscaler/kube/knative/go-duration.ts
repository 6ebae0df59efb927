import { parseDuration } from "../../../lib/duration.ts";

const goUnitMs: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/**
 * A Go duration as `time.ParseDuration` reads it (Knative's annotations and ConfigMaps), in
 * milliseconds, not rounded; a sign is kept (`-1s` is -1000). Undefined when it is not one.
 */
export function goDurationMs(text: string): number | undefined {
  const sign = text.startsWith("-") ? -1 : 1;
  const rest = text.startsWith("-") || text.startsWith("+") ? text.slice(1) : text;
  if (rest === "0") return 0;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(rest)) return undefined;
  let ms = 0;
  for (const [, amount, unit] of rest.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g))
    ms += Number(amount) * goUnitMs[unit!]!;
  return sign * ms;
}

/** A Go duration in Snooze's form (as written when Snooze reads it too); undefined for a negative one. */
export function goDuration(text: string): string | undefined {
  if (parseDuration(text) !== undefined) return text;
  const ms = goDurationMs(text);
  return ms === undefined || ms < 0 ? undefined : `${Math.round(ms)}ms`;
}
