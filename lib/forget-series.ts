import type { Counter, Gauge, Histogram } from "./prometheus.ts";

/** One series as prom-client keeps it: its label values (a histogram's buckets beside them). */
interface Kept {
  labels: Record<string, string | number>;
}

/**
 * Removes every series of `metric` whose labels include all of `labels`, whatever its other labels
 * say. prom-client's own `remove` takes one series' full label set, and a model's series differ in
 * the rest (`code`, `outcome`, `from`, `to` ...), which are not known here. A series that can no
 * longer grow (its model or slot is gone) would otherwise stay in every scrape for good: a process
 * that reloads its models for weeks had `/metrics` grow by about 60 series per model it ever
 * served. prom-client keeps its series in `hashMap` (15.x, as since 11.x); the unit test of this
 * file tells an upgrade that moved it.
 */
export function forgetSeries(metric: Counter | Gauge | Histogram, labels: Record<string, string>): void {
  const kept = (metric as unknown as { hashMap: Record<string, Kept> }).hashMap;
  const wanted = Object.entries(labels);
  for (const series of Object.values(kept))
    if (wanted.every(([name, value]) => series.labels[name] === value)) metric.remove(series.labels);
}
