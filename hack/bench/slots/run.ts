import { parseArgs } from "node:util";
import { median } from "../stats.ts";
import { comparePolicies, dedicatedReference } from "./compare.ts";
import { writeSection } from "./docs-section.ts";
import { flexInferDefaults } from "./flexinfer-policy.ts";
import { formatMarkdown } from "./format-markdown.ts";
import { arbiterPolicy } from "./policy.ts";
import {
  type Robustness,
  resultsTable,
  robustnessText,
  settingsDescription,
  targetLines,
  traceDescription,
} from "./report.ts";
import { checkTargets } from "./results.ts";
import { saturationDefaults, saturationRequests } from "./saturation.ts";
import { benchConfig, benchSeed, benchTraceShape } from "./scenario.ts";
import { simulateSlot } from "./simulator.ts";
import { generateTrace } from "./trace.ts";

/**
 * `npm run bench:slots`: replays one seeded mixed-demand trace against the
 * sticky, fifo and FlexInfer-like slot policies in virtual time, repeats it
 * over more seeds for robustness, prints the results and writes them into
 * their own section of docs/benchmarks.md.
 */
const usage = "usage: npm run bench:slots -- [--seed N] [--seeds N] [--out FILE] [--no-write]";

function parseFlags() {
  try {
    return parseArgs({
      options: {
        seed: { type: "string", default: String(benchSeed) },
        seeds: { type: "string", default: "20" },
        out: { type: "string", default: "docs/benchmarks.md" },
        "no-write": { type: "boolean", default: false },
        help: { type: "boolean", default: false },
      },
    }).values;
  } catch (error) {
    console.error(`${(error as Error).message}\n${usage}`);
    process.exit(2);
  }
}
const values = parseFlags();
if (values.help) {
  console.log(usage);
  process.exit(0);
}
const seed = Number(values.seed);
const seedCount = Number(values.seeds);
if (!Number.isInteger(seed) || !Number.isInteger(seedCount) || seedCount < 0) {
  console.error(usage);
  process.exit(2);
}

const started = performance.now();
const config = benchConfig(seed);
const trace = generateTrace(benchTraceShape, seed);
const results = comparePolicies(trace.requests, config);
const reference = dedicatedReference(trace.requests, config);
const check = checkTargets(results);
for (const r of [...results, reference])
  if (r.violations.length > 0) throw new Error(`${r.policy}: ${r.violations.slice(0, 5).join("; ")}`);

const seeds = Array.from({ length: seedCount }, (_, i) => i + 1);
const runs = seeds.map((s) => comparePolicies(generateTrace(benchTraceShape, s).requests, benchConfig(s)));
const checks = runs.map(checkTargets);
const robustness: Robustness = {
  seeds,
  met: {
    swaps: checks.filter((c) => c.stickyFewerSwapsThanFifo).length,
    p95: checks.filter((c) => c.stickyLowestP95).length,
    lost: checks.filter((c) => c.stickyLostNone).length,
    all: checks.filter((c) => c.stickyFewerSwapsThanFifo && c.stickyLowestP95 && c.stickyLostNone).length,
  },
  medians: results.map((_, i) => ({
    policy: results[i]!.policy,
    swaps: median(runs.map((r) => r[i]!.swaps)),
    holdP95Ms: median(runs.map((r) => r[i]!.holdP95Ms)),
    holdP99Ms: median(runs.map((r) => r[i]!.holdP99Ms)),
    refused: runs.reduce((sum, r) => sum + r[i]!.refused, 0),
  })),
};

// The reproducer of sticky's starvation under a saturated resident, with an early control plane's heldSince and today's.
const saturation = (["held-nonzero", "oldest-held"] as const).map((heldSince) => {
  const result = simulateSlot(
    saturationRequests(),
    { ...benchConfig(seed), heldSince },
    arbiterPolicy("sticky"),
  );
  const waiting = result.outcomes.find((o) => o.model === saturationDefaults.waiting)!;
  return { heldSince, waiting };
});
const elapsed = (performance.now() - started) / 1000;

const s = (ms: number) => (ms / 1000).toFixed(1);
const body = `## Slot policies (simulated)

\`npm run bench:slots\` replays one seeded mixed-demand trace against three slot policies in one run,
in virtual time (a discrete-event simulation of one slot: \`hack/bench/slots/\`; about ${Math.max(1, Math.round(elapsed))} s
of wall time). sticky and fifo are the real \`decideSlot\` of \`autoscaler/slot-arbiter.ts\`;
flexinfer-like is FlexInfer's shared-GPU leader election (2-minute demand window, 5-minute swap
cooldown, priority gate) expressed on the same slot state. Every policy's decisions are carried out
the same way: drain the incumbent (what still runs at drainTimeout is cut), sleep it, wake the target,
warm it up, release the held requests. Policies and the swap timeline: [slots.md](slots.md).

Trace (seed ${seed}, fixed in \`hack/bench/slots/scenario.ts\` before the first run):

${traceDescription(trace)}

Settings:

${settingsDescription(config, flexInferDefaults)}

Hold = time in the activator until dispatch, or until the 503 (a refusal counts at the budget it
used, not as zero); percentiles by nearest rank over all ${results[0]!.requests} slot requests. Median swap = from the
decision to the target being ready (drain, sleep, wake, warm-up). GPU min = time the slot members held
a GPU (starting, waking, ready or draining) until the last request ended: one GPU for the slot, one
each in the dedicated row. "cut" = dispatched, then ended unanswered: still running when its replica's drain time was over, or its engine stopped under it.

${resultsTable([...results, reference])}

Targets (issue 4), on this trace:

${targetLines(check)}

${seeds.length > 0 ? `Robustness. ${robustnessText(robustness)}` : "(Robustness over more seeds: not run, --seeds 0.)"}

The p95 hold is set by a handful of overlapping bursts per trace, so it moves with the trace; the
dedicated-GPU row shows how little of it is queueing for an engine's concurrency.

An early weakness (reproducer: \`hack/bench/slots/saturation.ts\`): one member saturated (a request every
${s(saturationDefaults.residentEveryMs)} s, more than its concurrency serves) and one request for another member at
t=${s(saturationDefaults.waitingAt)} s. sticky promises that no member is passed over for longer than maxWait.

${saturation
  .map(
    ({ heldSince, waiting }) =>
      `- heldSince = ${heldSince === "held-nonzero" ? "when held went non-zero (what an early ModelController reported)" : "arrival of the oldest held request (what the activators report today)"}: the waiting request ${waiting.result === "served" ? `was served after ${s(waiting.holdMs)} s held` : `got a 503 after ${s(waiting.holdMs)} s held`}.`,
  )
  .join("\n")}
`;

const section = formatMarkdown(body);
console.log(section);
if (!values["no-write"]) {
  await writeSection(values.out, "slots", section, "Benchmarks");
  console.log(`(written to the slots section of ${values.out})`);
}
