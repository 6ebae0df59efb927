/**
 * What the chaos run's soak mode (`node hack/chaos.ts --soak`) measures of a long-running `snooze
 * serve` from outside, with no route of its own: the process's resident memory, threads and open
 * files (`/proc`), its child processes, the series `/metrics` exposes (how many, by family, and
 * which label takes many values), and heap snapshots the process writes on a signal
 * (`node --heapsnapshot-signal`; writing one collects garbage first, so its size is the heap used
 * after a full GC), summed by constructor so two can be compared. Slopes are least squares against
 * the requests done, so a leak reads as bytes (or series, files, objects) per 1,000 requests.
 */
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { type ProcStat, readProcStat } from "../lib/proc-stat.ts";

export interface ProcessSample {
  rssKiB: number;
  threads: number;
  openFiles: number;
  /** Processes below this one (its engines' guards and the engines), not counting zombies. */
  descendants: number;
  zombies: number;
}

/** Every process /proc lists, as its /proc/<pid>/stat tells (one gone before it was read left out). */
export function processTable(): ProcStat[] {
  const found: ProcStat[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat) found.push(stat);
  }
  return found;
}

/** `/proc/<pid>/status` and `/proc/<pid>/fd`, and the process tree below `pid`. */
export function sampleProcess(pid: number): ProcessSample {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  const field = (name: string) =>
    Number(new RegExp(`^${name}:\\s+(\\d+)`, "m").exec(status)?.[1] ?? Number.NaN);
  const parents = new Map(processTable().map((stat) => [stat.pid, stat]));
  const below = (p: number): boolean => {
    for (let at = parents.get(p), hops = 0; at && hops < 64; at = parents.get(at.ppid), hops++) {
      if (at.ppid === pid) return true;
    }
    return false;
  };
  let descendants = 0;
  let zombies = 0;
  for (const [p, info] of parents) {
    if (p === pid || !below(p)) continue;
    if (info.state === "Z") zombies++;
    else descendants++;
  }
  return {
    rssKiB: field("VmRSS"),
    threads: field("Threads"),
    openFiles: readdirSync(`/proc/${pid}/fd`).length,
    descendants,
    zombies,
  };
}

export interface MetricsSample {
  series: number;
  byFamily: Record<string, number>;
  /** For each label name, how many distinct values it has across all series. */
  labelValues: Record<string, number>;
  /** Series whose `model` label names a model that is not configured now. */
  staleModelSeries: string[];
}

/** Counts the series of a Prometheus text exposition (histogram buckets each count as one). */
export function sampleMetrics(text: string, models: ReadonlySet<string>): MetricsSample {
  const byFamily: Record<string, number> = {};
  const values = new Map<string, Set<string>>();
  const stale: string[] = [];
  let series = 0;
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    series++;
    const name = /^[a-zA-Z_:][a-zA-Z0-9_:]*/.exec(line)?.[0] ?? "?";
    const family = name.replace(/_(bucket|sum|count|total|created)$/, "");
    byFamily[family] = (byFamily[family] ?? 0) + 1;
    const labels = /\{(.*)\}/.exec(line)?.[1] ?? "";
    for (const m of labels.matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) {
      const [, label, value] = m as unknown as [string, string, string];
      if (label === "le" || label === "quantile") continue;
      const set = values.get(label) ?? new Set<string>();
      values.set(label, set.add(value));
      if (label === "model" && value !== "" && !models.has(value)) stale.push(line.slice(0, 160));
    }
  }
  return {
    series,
    byFamily,
    labelValues: Object.fromEntries([...values].map(([label, set]) => [label, set.size])),
    staleModelSeries: stale,
  };
}

export interface HeapSummary {
  /** Sum of every node's self size: the heap in use after the snapshot's full GC. */
  bytes: number;
  nodes: number;
  /** `type:name` (objects by constructor, closures by function name) → count and bytes. */
  byKind: Map<string, { count: number; bytes: number }>;
}

/** Reads a `.heapsnapshot` file (V8's JSON) and sums its nodes by type and constructor name. */
export function summarizeHeapSnapshot(path: string): HeapSummary {
  const snapshot = JSON.parse(readFileSync(path, "utf8")) as {
    snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
    nodes: number[];
    strings: string[];
  };
  const fields = snapshot.snapshot.meta.node_fields;
  const types = snapshot.snapshot.meta.node_types[0];
  const width = fields.length;
  const typeAt = fields.indexOf("type");
  const nameAt = fields.indexOf("name");
  const sizeAt = fields.indexOf("self_size");
  const byKind = new Map<string, { count: number; bytes: number }>();
  let bytes = 0;
  const { nodes, strings } = snapshot;
  for (let i = 0; i < nodes.length; i += width) {
    const type = types[nodes[i + typeAt]!]!;
    const size = nodes[i + sizeAt]!;
    bytes += size;
    // Strings and code are many and nameless as kinds: one bucket each.
    const named = type === "object" || type === "closure" || type === "native";
    const key = named ? `${type}:${strings[nodes[i + nameAt]!]!.slice(0, 60)}` : type;
    const kind = byKind.get(key) ?? { count: 0, bytes: 0 };
    kind.count++;
    kind.bytes += size;
    byKind.set(key, kind);
  }
  return { bytes, nodes: nodes.length / width, byKind };
}

/** The heap snapshot files in `dir`, oldest first. */
export function heapSnapshots(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir)
    .filter((f) => f.endsWith(".heapsnapshot"))
    .map((f) => `${dir}/${f}`)
    .sort((a, b) => statSync(a).mtimeMs - statSync(b).mtimeMs);
}

/** The kinds whose count grew most from `before` to `after`, with the growth per `per` requests. */
export function heapGrowth(
  before: HeapSummary,
  after: HeapSummary,
  requests: number,
  top = 25,
): { kind: string; count: number; bytes: number; perThousand: number }[] {
  const rows: { kind: string; count: number; bytes: number; perThousand: number }[] = [];
  for (const [kind, a] of after.byKind) {
    const b = before.byKind.get(kind) ?? { count: 0, bytes: 0 };
    const count = a.count - b.count;
    if (count <= 0) continue;
    rows.push({
      kind,
      count,
      bytes: a.bytes - b.bytes,
      perThousand: requests > 0 ? (count * 1000) / requests : Number.NaN,
    });
  }
  return rows.sort((x, y) => y.count - x.count).slice(0, top);
}

/** Least-squares slope of y against x. */
export function slope(points: readonly (readonly [number, number])[]): number {
  const n = points.length;
  if (n < 2) return Number.NaN;
  const mx = points.reduce((s, [x]) => s + x, 0) / n;
  const my = points.reduce((s, [, y]) => s + y, 0) / n;
  let num = 0;
  let den = 0;
  for (const [x, y] of points) {
    num += (x - mx) * (y - my);
    den += (x - mx) ** 2;
  }
  return den === 0 ? Number.NaN : num / den;
}
