/**
 * Small statistics for benchmark samples. Percentiles use the nearest-rank
 * method (the value below which `p` percent of the samples fall, taken from
 * the samples themselves), which is what load tools such as wrk report.
 */

/** The p-th percentile (0 < p ≤ 100) of `values` by nearest rank; NaN for no samples. */
export function percentile(values: readonly number[], p: number): number {
  if (!(p > 0 && p <= 100)) throw new RangeError(`percentile must be in (0, 100], not ${p}`);
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.max(0, rank - 1)]!;
}

export function median(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

export function mean(values: readonly number[]): number {
  if (values.length === 0) return Number.NaN;
  let sum = 0;
  for (const value of values) sum += value;
  return sum / values.length;
}

export interface Summary {
  count: number;
  min: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

export function summarize(values: readonly number[]): Summary {
  if (values.length === 0)
    return { count: 0, min: Number.NaN, p50: Number.NaN, p90: Number.NaN, p99: Number.NaN, max: Number.NaN };
  const sorted = [...values].sort((a, b) => a - b);
  const at = (p: number) => sorted[Math.max(0, Math.ceil((p / 100) * sorted.length) - 1)]!;
  return {
    count: sorted.length,
    min: sorted[0]!,
    p50: at(50),
    p90: at(90),
    p99: at(99),
    max: sorted[sorted.length - 1]!,
  };
}

/**
 * The median of per-round values: with several interleaved rounds on a noisy
 * machine, one disturbed round should not move the result.
 */
export function medianOf<T>(rounds: readonly T[], pick: (round: T) => number): number {
  return median(rounds.map(pick).filter((value) => Number.isFinite(value)));
}

/** Formats a number with `digits` significant decimals, "n/a" when not finite. */
export function fmt(value: number, digits = 2): string {
  if (!Number.isFinite(value)) return "n/a";
  return value.toFixed(digits);
}
