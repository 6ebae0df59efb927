import { fmt } from "../stats.ts";
import { type Goals, kindOf, type PolicyResult } from "./results.ts";
import type { Trace } from "./trace.ts";
import { jitter, type Policy, type Size, timings, type WorldModel } from "./world.ts";

/** Markdown for the benchmark's section of docs/benchmarks.md. */
const s = (ms: number) => fmt(ms / 1000, 1);
const yes = (ok: boolean) => (ok ? "yes" : "**no**");
const pct = (ratio: number) => `${ratio >= 1 ? "+" : ""}${fmt((ratio - 1) * 100, 0)}%`;

export function resultsTable(results: readonly PolicyResult[]): string {
  const lines = [
    "| policy | requests | met a sleeping engine | met a cold engine | sleeping + cold | added wait p50 (s) | p95 (s) | p99 (s) | 503s | awake GPU-hours | prewarms (hit / wasted / staged to sleep) |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const r of results)
    lines.push(
      `| ${r.policy} | ${r.requests} | ${r.sleeping} | ${r.cold} | ${r.hits} | ${s(r.waitP50Ms)} | ${s(r.waitP95Ms)} | ${s(r.waitP99Ms)} | ${r.refused} | ${fmt(r.awakeHours, 1)} | ${r.prewarms.total > 0 ? `${r.prewarms.hit} / ${r.prewarms.wasted} / ${r.prewarms.asleep}` : "-"} |`,
    );
  return lines.join("\n");
}

export function goalLines(g: Goals): string {
  return [
    `- Prewarm avoids at least half of the fixed ladder's sleeping/cold hits (snooze-prewarm against snooze-fixed): hits ${pct(g.prewarm.hitsRatio)}, awake GPU-hours ${pct(g.prewarm.awakeRatio)} (at most +10% allowed): ${yes(g.prewarm.met)}.`,
    `- The same on top of the learned ladder (snooze-learned+prewarm against snooze-learned): hits ${pct(g.prewarmOnLearned.hitsRatio)}, awake GPU-hours ${pct(g.prewarmOnLearned.awakeRatio)}: ${yes(g.prewarmOnLearned.met)}.`,
    `- The learned ladder spends fewer awake GPU-hours than the fixed one (${pct(g.learned.awakeRatio)}) at the same or lower p95 added wait (${s(g.learned.p95Learned)} s against ${s(g.learned.p95Fixed)} s): ${yes(g.learned.met)}.`,
  ].join("\n");
}

/** The goals on every seed, and their mean: the hit and awake-time ratios behind each. */
export function seedTable(bySeed: readonly { seed: number; goals: Goals }[]): string {
  // One decimal: a seed just short of -50% must not read as -50%.
  const pct = (ratio: number) => `${ratio >= 1 ? "+" : ""}${fmt((ratio - 1) * 100, 1)}%`;
  const lines = [
    "| seed | snooze-prewarm against snooze-fixed: hits, awake | goal met | snooze-learned+prewarm against snooze-learned: hits, awake | goal met | learned against fixed: awake, p95 wait (s) | goal met |",
    "|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const { seed, goals: g } of bySeed)
    lines.push(
      `| ${seed} | ${pct(g.prewarm.hitsRatio)}, ${pct(g.prewarm.awakeRatio)} | ${yes(g.prewarm.met)} | ${pct(g.prewarmOnLearned.hitsRatio)}, ${pct(g.prewarmOnLearned.awakeRatio)} | ${yes(g.prewarmOnLearned.met)} | ${pct(g.learned.awakeRatio)}, ${s(g.learned.p95Learned)} against ${s(g.learned.p95Fixed)} | ${yes(g.learned.met)} |`,
    );
  const mean = (f: (g: Goals) => number) => bySeed.reduce((sum, x) => sum + f(x.goals), 0) / bySeed.length;
  const all = (f: (g: Goals) => boolean) => `${bySeed.filter((x) => f(x.goals)).length} of ${bySeed.length}`;
  lines.push(
    `| mean | ${pct(mean((g) => g.prewarm.hitsRatio))}, ${pct(mean((g) => g.prewarm.awakeRatio))} | ${all((g) => g.prewarm.met)} | ${pct(mean((g) => g.prewarmOnLearned.hitsRatio))}, ${pct(mean((g) => g.prewarmOnLearned.awakeRatio))} | ${all((g) => g.prewarmOnLearned.met)} | ${pct(mean((g) => g.learned.awakeRatio))}, ${s(mean((g) => g.learned.p95Learned))} against ${s(mean((g) => g.learned.p95Fixed))} | ${all((g) => g.learned.met)} |`,
  );
  return lines.join("\n");
}

/** Hits and awake hours by kind of model, fixed ladder against each Snooze variant. */
export function kindTable(results: readonly PolicyResult[], models: readonly WorldModel[]): string {
  const kinds = ["job", "session", "tail"] as const;
  const names: Record<(typeof kinds)[number], string> = {
    job: "scheduled jobs",
    session: "sessions (chat, code, agents, API)",
    tail: "long tail",
  };
  const snooze = results.filter((r) => r.policy.startsWith("snooze"));
  const lines = [
    `| models | ${snooze.map((r) => `${r.policy}: hits, awake h`).join(" | ")} |`,
    `|---|${snooze.map(() => "--:").join("|")}|`,
  ];
  for (const kind of kinds) {
    const ids = models.filter((m) => kindOf(m) === kind).map((m) => m.id);
    const cells = snooze.map((r) => {
      let hits = 0;
      let hours = 0;
      for (const id of ids) {
        const e = r.byModel.get(id);
        hits += e?.hits ?? 0;
        hours += e?.awakeHours ?? 0;
      }
      return `${hits}, ${fmt(hours, 1)}`;
    });
    lines.push(`| ${names[kind]} (${ids.length}) | ${cells.join(" | ")} |`);
  }
  return lines.join("\n");
}

export function worldDescription(models: readonly WorldModel[], trace: Trace, warmupDays: number): string {
  const bySlot = new Map<string, WorldModel[]>();
  for (const m of models) bySlot.set(m.slot, [...(bySlot.get(m.slot) ?? []), m]);
  const counts = new Map<string, number>();
  for (const r of trace.requests) counts.set(r.model, (counts.get(r.model) ?? 0) + 1);
  const slotLines = [...bySlot].map(
    ([slot, members]) =>
      `- ${slot}: ${members.map((m) => `${m.id} (${m.role}; ${counts.get(m.id) ?? 0} requests)`).join("; ")}.`,
  );
  return [
    `${trace.days} days from Monday ${new Date(trace.start).toISOString().slice(0, 10)} (UTC), seed ${trace.seed}, ${trace.requests.length} requests; every policy runs all of it, the results count days ${warmupDays + 1}–${trace.days} (the first ${warmupDays} are history for the learning).`,
    "",
    ...slotLines,
  ].join("\n");
}

export function timingLines(): string {
  const d = (ms: number) => `${fmt(ms / 1000, ms < 10_000 ? 1 : 0)} s`;
  return (Object.keys(timings) as Size[])
    .map((size) => {
      const t = timings[size];
      return `- ${size.toUpperCase()}: start ${d(t.startMs)}, level-1 sleep ${d(t.sleep1Ms)} / wake ${d(t.wake1Ms)}, level-2 sleep ${d(t.sleep2Ms)} / wake ${d(t.wake2Ms)}, warm-up ${d(t.warmupMs)}, ${t.decodeTokensPerSecond} tokens/s decode`;
    })
    .concat(`- every start, sleep and wake ±${jitter * 100}% (seeded per operation)`)
    .join("\n");
}

export function policyLines(policies: readonly Policy[]): string {
  return policies.map((p) => `- **${p.name}**: ${p.description}.`).join("\n");
}
