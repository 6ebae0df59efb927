import { fork } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { writeSection } from "../slots/docs-section.ts";
import { daySvg, toPng } from "./plot.ts";
import type { ReplayResult } from "./replay.ts";
import {
  goalLines,
  kindTable,
  policyLines,
  resultsTable,
  seedTable,
  timingLines,
  worldDescription,
} from "./report.ts";
import { checkGoals, type PolicyResult, summarize } from "./results.ts";
import { dayMs, generateTrace, traceStart } from "./trace.ts";
import { budgetSweep, policies, prewarmBudget, wakeTarget, worldModels } from "./world.ts";

/**
 * `npm run bench:prewarm`: replays one seeded multi-day trace for 20 models on 4 slots through the
 * real control plane in virtual time, once per policy (in parallel processes), prints the
 * comparison, writes it into its own section of docs/benchmarks.md and renders one day as a PNG.
 */
const usage =
  "usage: npm run bench:prewarm -- [--seed N] [--seeds N,N,...] [--days N] [--warmup N] [--jobs N] [--out FILE] [--plot FILE] [--no-sweep] [--no-write] [--keep DIR]";

function flags() {
  try {
    return parseArgs({
      options: {
        seed: { type: "string", default: "1" },
        // More seeds for the goals: the four Snooze policies only, each on its own trace.
        seeds: { type: "string", default: "2,3,4,5" },
        days: { type: "string", default: "21" },
        warmup: { type: "string", default: "7" },
        jobs: { type: "string", default: String(Math.max(1, Math.min(2, availableParallelism()))) },
        out: { type: "string", default: "docs/benchmarks.md" },
        plot: { type: "string", default: "docs/images/prewarm-day.png" },
        "no-write": { type: "boolean", default: false },
        "no-sweep": { type: "boolean", default: false },
        // Replays kept in DIR (one JSON per policy and seed) are reused and new ones kept there:
        // an interrupted run goes on where it stopped.
        keep: { type: "string" },
        help: { type: "boolean", default: false },
      },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n${usage}`);
    process.exit(2);
  }
}
const values = flags();
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const seed = Number(values.seed);
const days = Number(values.days);
const warmup = Number(values.warmup);
const jobs = Number(values.jobs);
const moreSeeds = values.seeds === "" ? [] : values.seeds.split(",").map(Number);
if (
  ![seed, days, warmup, jobs, ...moreSeeds].every(Number.isInteger) ||
  days <= warmup ||
  jobs < 1 ||
  moreSeeds.includes(seed)
) {
  console.error(usage);
  process.exit(2);
}

const started = performance.now();
const trace = generateTrace(worldModels, days, seed);
const dir = values.keep ?? mkdtempSync(join(tmpdir(), "snooze-bench-prewarm-"));
mkdirSync(dir, { recursive: true });
const worker = fileURLToPath(new URL("./worker.ts", import.meta.url));

async function runOne(name: string, runSeed = seed): Promise<ReplayResult> {
  const out = join(dir, `${name}-${runSeed}.json`);
  if (values.keep && existsSync(out)) return JSON.parse(readFileSync(out, "utf8")) as ReplayResult;
  await new Promise<void>((resolve, reject) => {
    const child = fork(worker, [name, String(runSeed), String(days), out], { stdio: "inherit" });
    child.on("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${name}: worker exited ${code}`)),
    );
  });
  const result = JSON.parse(readFileSync(out, "utf8")) as ReplayResult;
  console.error(`${name} (seed ${runSeed}): ${(result.wallMs / 1000).toFixed(0)} s`);
  return result;
}

const runs = new Map<string, ReplayResult>();
const sweep = values["no-sweep"] ? [] : budgetSweep;
const goalPolicies = ["snooze-fixed", "snooze-prewarm", "snooze-learned", "snooze-learned+prewarm"];
// The slowest (learned) runs first, so the two processes finish close together.
const queue = [
  ...[...policies, ...sweep].map((p) => ({ name: p.name, seed })),
  ...moreSeeds.flatMap((s) => goalPolicies.map((name) => ({ name, seed: s }))),
].sort((a, b) => Number(b.name.includes("learned")) - Number(a.name.includes("learned")));
const replayWallMs: number[] = [];
/** Summaries of the goal policies on the other seeds, as each finishes (a replay is large). */
const otherSeeds = new Map<number, PolicyResult[]>();
await Promise.all(
  Array.from({ length: jobs }, async () => {
    for (let run = queue.shift(); run !== undefined; run = queue.shift()) {
      const result = await runOne(run.name, run.seed);
      replayWallMs.push(result.wallMs);
      if (run.seed === seed) runs.set(run.name, result);
      else {
        const start = traceStart + warmup * dayMs;
        otherSeeds.set(run.seed, [
          ...(otherSeeds.get(run.seed) ?? []),
          summarize(result, start, traceStart + days * dayMs),
        ]);
      }
    }
  }),
);
if (!values.keep) rmSync(dir, { recursive: true, force: true });

const from = trace.start + warmup * dayMs;
const to = trace.start + days * dayMs;
const results = policies.map((p) => summarize(runs.get(p.name)!, from, to));
for (const r of results)
  if (r.accountingError > 0.01)
    throw new Error(
      `${r.policy}: snooze_gpu_seconds_total is off by ${(r.accountingError * 100).toFixed(1)}%`,
    );
const goals = checkGoals(results);
const byPolicy = (name: string) => results.find((r) => r.policy === name)!;
const bySeed = [
  { seed, goals },
  ...[...otherSeeds.entries()].sort(([a], [b]) => a - b).map(([s, r]) => ({ seed: s, goals: checkGoals(r) })),
];
const sweepResults = sweep.map((p) => summarize(runs.get(p.name)!, from, to));
const sweepTable = (() => {
  if (sweepResults.length === 0) return "(Budget sweep: not run, --no-sweep.)";
  const byName = new Map([...results, ...sweepResults].map((r) => [r.policy, r]));
  const fixed = byName.get("snooze-fixed")!;
  const learned = byName.get("snooze-learned")!;
  const rows = [
    "| prewarmBudget | on the fixed ladder: hits, awake GPU-hours | against snooze-fixed | on the learned ladder: hits, awake GPU-hours | against snooze-learned |",
    "|---|--:|--:|--:|--:|",
  ];
  const pct = (a: number, b: number) => `${a >= b ? "+" : ""}${(((a - b) / b) * 100).toFixed(0)}%`;
  for (const budget of ["10m", prewarmBudget, "1h"]) {
    const f = byName.get(budget === prewarmBudget ? "snooze-prewarm" : `snooze-prewarm ${budget}`)!;
    const l = byName.get(
      budget === prewarmBudget ? "snooze-learned+prewarm" : `snooze-learned+prewarm ${budget}`,
    )!;
    rows.push(
      `| ${budget} | ${f.hits}, ${f.awakeHours.toFixed(1)} | hits ${pct(f.hits, fixed.hits)}, awake ${pct(f.awakeHours, fixed.awakeHours)} | ${l.hits}, ${l.awakeHours.toFixed(1)} | hits ${pct(l.hits, learned.hits)}, awake ${pct(l.awakeHours, learned.awakeHours)} |`,
    );
  }
  return rows.join("\n");
})();

// One weekday of the last week, one slot, the fixed ladder against the learned ladder with prewarm.
const plotDay = trace.start + (days - 7 + 1) * dayMs;
const plotSlot = "gpu-0";
const plotModels = worldModels.filter((m) => m.slot === plotSlot).map((m) => m.id);
const svg = daySvg({
  title: `${plotSlot}, ${new Date(plotDay).toISOString().slice(0, 10)} (a Tuesday, UTC): tiers, requests and prewarms`,
  dayStart: plotDay,
  models: plotModels,
  runs: [runs.get("snooze-fixed")!, runs.get("snooze-prewarm")!, runs.get("snooze-learned+prewarm")!],
});
let plotted = "not written (--no-write)";
if (!values["no-write"]) {
  const png = toPng(svg, values.plot);
  plotted = png.ok ? values.plot : `not rendered: ${png.reason}`;
}
const elapsed = (performance.now() - started) / 1000;
// Each replay's own wall time, so a run resumed with --keep still says what the replays took.
const replayWall = replayWallMs.reduce((sum, ms) => sum + ms, 0) / 1000;

const body = `## Prewarm and the learned ladder (simulated)

\`npm run bench:prewarm\` replays a seeded multi-day trace for 20 models on 4 slots **through the real
control plane** in virtual time: \`localAutoscaler\` (the real Autoscaler, ModelController, Slot, tier
ladder and slot arbiter, prewarm and learned ladder included) on the manual clock of the unit tests,
over their fake platform, whose engines take the modelled time for every start, sleep, wake and
warm-up (\`hack/bench/prewarm/\`; ${replayWallMs.length} replays that took ${Math.round(replayWall)} s of wall time in all, ${jobs} at a time, on two cores shared with other work${values.keep ? `; this report ${Math.round(elapsed)} s, reusing kept replays` : ""}). In front of it a small
activator does what the real one does at the seam: a request finds a ready replica and is dispatched,
or it is held and \`demand\` is signalled; every change of in-flight and held counts goes to \`stats\`;
held requests are released when their model's replica turns ready. Requests run for their prefill
plus decode time, concurrency unlimited, so added wait is only activations and swaps.

**Trace.** ${worldDescription(worldModels, trace, warmup)}

How it is generated (\`hack/bench/prewarm/trace.ts\`), shaped on published LLM-serving traces:

- Sessions (chat, coding, agents, API clients) start as a non-homogeneous Poisson process whose rate
  follows the time of day and the day of the week: office hours with a morning ramp and a lunch dip,
  or evening-heavy consumer use; weekends lower. The week-long [Azure LLM inference trace
  2024](https://github.com/Azure/AzurePublicDataset/blob/master/AzureLLMInferenceDataset2024.md)
  (DynamoLLM) and [BurstGPT](https://github.com/HPMLL/BurstGPT) ([paper](https://arxiv.org/abs/2401.17644),
  10.31M requests to Azure OpenAI over 213 days) show such daily and weekly cycles; the
  [Azure LLM inference trace 2023](https://github.com/Azure/AzurePublicDataset/blob/master/AzureLLMInferenceDataset2023.md)
  (Splitwise) separates coding (many short requests) from conversation.
- Within a session requests follow one another after log-normal think times (heavy-tailed, so
  sessions are bursty, as BurstGPT finds for conversation traffic); a session's length is geometric.
- Surges: now and then a head model gets extra sessions for 10–30 minutes (BurstGPT's bursts).
- Scheduled jobs: a clump of requests at a fixed time of the day, week or hour, within seconds of it,
  now and then skipped, like the timer triggers of the
  [Azure Functions trace 2019](https://github.com/Azure/AzurePublicDataset/blob/master/AzureFunctionsDataset2019.md)
  ("Serverless in the Wild", whose histogram-based keep-alive and pre-warm policy is the closest
  published relative of this prewarm).
- Long tail: models used a few times a day or a week at random hours; most applications in the
  Azure Functions trace are invoked rarely.
- Tokens are log-normal (input median 600, output median 180).

**Engines** (assumed, scaled from issue 13's measurements of an 8B model; cold starts assumed):

${timingLines()}

**Policies**, all the same controller and slot arbiter (sticky, Snooze's slot defaults), differing only in
their tier settings for every model:

${policyLines(policies)}

${resultsTable(results)}

Hits and awake GPU-hours by kind of model:

${kindTable(results, worldModels)}

Goals (issue 13), on this trace:

${goalLines(goals)}

The same goals on ${bySeed.length === 1 ? "this seed only (--seeds empty)" : `${bySeed.length} seeds (${bySeed.map((b) => b.seed).join(", ")}; each its own trace of the same world, the four Snooze policies only)`}:

${seedTable(bySeed)}

Where the cut comes from: mostly not from waking ahead of a window but from the two cheap parts of
prewarm ([prewarm.md](prewarm.md#prewarm)). The fixed ladder stops a slot member 30 minutes into
its sleep, so most of its hits are cold starts, and every request that arrives during a start (60 s
for an 8B model, 150 s for a 32B one) is a hit too. The hold keeps a sleeper that a request is likely
to want within 4 hours, and the staged start brings a cold one to sleep before its busy hours: the
request then waits for a wake of a few seconds, and fewer requests arrive meanwhile. A sleeper
holds no accelerator, so awake GPU-hours go down, not up; what it costs is host RAM for longer
(this benchmark sets no \`hostMemoryBudget\`). On this trace, requests that met a cold engine
went from ${byPolicy("snooze-fixed").cold} to ${byPolicy("snooze-prewarm").cold}, and those that met a sleeping one from ${byPolicy("snooze-fixed").sleeping} to ${byPolicy("snooze-prewarm").sleeping}. Windows (a wake ahead of a likely 5-15
minutes) add the scheduled jobs' hits. What remains is mostly the first request after \`sleepAfter\`
in busy hours (random within the hour, not predictable by the time of day), and members waiting
for a busy slot, which a prewarm never evicts.

How the prewarm budget moves hits and awake time (the same trace):

${sweepTable}

One day of ${plotSlot} (${plotted === values.plot ? `[prewarm-day.png](images/prewarm-day.png)` : plotted}): the fixed ladder (top), the fixed ladder with
prewarm (middle) and the learned ladder with prewarm (bottom); bands are tiers, ticks requests (red: met a sleeping or cold engine),
bars under a lane prewarms (green: a request came; purple: a staged start that reached its sleep;
grey: wasted).

${plotted === values.plot ? "![One day of gpu-0](images/prewarm-day.png)" : ""}

The snooze_gpu_seconds_total the control plane counts agreed with the benchmark's own count from the
replica events within 1% for every policy (checked on every run). prewarmBudget ${prewarmBudget}, wakeTarget
${wakeTarget}.
`;

// Markdown is left as written (Biome does not format docs).
const section = body.replace(/\n{3,}/g, "\n\n");
console.log(section);
if (!values["no-write"]) {
  await writeSection(values.out, "prewarm", section, "Benchmarks");
  console.log(`(written to the prewarm section of ${values.out}; plot: ${plotted})`);
}
