import { formatDuration } from "../../../lib/duration.ts";
import { fmt } from "../stats.ts";
import type { FlexInferOptions } from "./flexinfer-policy.ts";
import type { PolicyResult, TargetCheck } from "./results.ts";
import type { SimConfig } from "./simulator.ts";
import { overlappingBursts, type Trace } from "./trace.ts";

/** Markdown for the benchmark's section of docs/benchmarks.md. */

const seconds = (ms: number) => fmt(ms / 1000, 1);
const minutes = (ms: number) => fmt(ms / 60_000, 0);
const yes = (ok: boolean) => (ok ? "yes" : "**no**");

export function resultsTable(results: readonly PolicyResult[]): string {
  const lines = [
    "| policy | swaps | median swap (s) | hold p50 (s) | hold p95 (s) | hold p99 (s) | hold max (s) | served | 503s | cut | GPU min | served / GPU min | background: p95 hold (s), 503s |",
    "|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|",
  ];
  for (const r of results)
    lines.push(
      `| ${r.policy} | ${r.swaps} | ${seconds(r.swapMedianMs)} | ${seconds(r.holdP50Ms)} | ${seconds(r.holdP95Ms)} | ${seconds(r.holdP99Ms)} | ${seconds(r.holdMaxMs)} | ${r.served}/${r.requests} | ${r.refused} | ${r.cut} | ${fmt(r.gpuMinutes, 1)} | ${fmt(r.servedPerGpuMinute, 1)} | ${seconds(r.background.holdP95Ms)}, ${r.background.refused} |`,
    );
  return lines.join("\n");
}

export function targetLines(check: TargetCheck): string {
  return [
    `- sticky has fewer swaps than fifo: ${yes(check.stickyFewerSwapsThanFifo)}`,
    `- sticky has a lower p95 hold than every other policy: ${yes(check.stickyLowestP95)}`,
    `- sticky lost no request (no 503, none cut): ${yes(check.stickyLostNone)}`,
  ].join("\n");
}

export function traceDescription(trace: Trace): string {
  const { shape } = trace;
  const bySlotMember = shape.members.map((model) => {
    const bursts = trace.bursts.filter((b) => b.model === model);
    const requests = bursts.reduce((sum, b) => sum + b.requests, 0);
    return `${model} ${bursts.length} bursts / ${requests} requests`;
  });
  const background = trace.requests.filter((r) => r.model === shape.background.model).length;
  const range = ([a, b]: [number, number]) => `${a / 1000} to ${b / 1000} s`;
  return [
    `- ${minutes(shape.durationMs)} minutes, seed ${trace.seed}: ${trace.bursts.length} bursts alternating between ${shape.members.length} slot members (${bySlotMember.join("; ")}).`,
    `- A burst lasts ${range(shape.burstMs)}; requests come in clumps of ${shape.clumpSize[0]}–${shape.clumpSize[1]} at once, ${shape.clumpsPerSecond[0]}–${shape.clumpsPerSecond[1]} clumps/s (drawn per burst), so several are in flight together.`,
    `- The next burst (always another member) starts ${range(shape.gapMs)} after the current one ends; a negative gap overlaps them: ${overlappingBursts(trace)} of ${trace.bursts.length} bursts overlap their predecessor.`,
    `- Tokens are log-normal: input median ${shape.inputTokens.median} (${shape.inputTokens.min}–${shape.inputTokens.max}), output median ${shape.outputTokens.median} (${shape.outputTokens.min}–${shape.outputTokens.max}).`,
    `- Background: ${shape.background.model}, ${shape.background.requestsPerSecond} requests/s Poisson on its own GPU (${background} requests), to show the slot does not disturb it.`,
  ].join("\n");
}

export function settingsDescription(config: SimConfig, flexInfer: FlexInferOptions): string {
  const d = formatDuration;
  const s = config.slot;
  const t = config.tier;
  const engines = config.models
    .filter((m) => m.inSlot)
    .map(
      ({ id, engine: e }) =>
        `${id}: wake ${d(e.wakeL1Ms)} from level 1 (${d(e.wakeL2Ms)} from level 2), sleep ${d(e.sleepL1Ms)}, warm-up ${d(e.warmupMs)}, ${e.decodeTokensPerSecond} tokens/s per sequence, prefill ${e.prefillTokensPerSecond} tokens/s`,
    );
  return [
    `- Slot (Snooze defaults): minResidency ${d(s.minResidency)}, swapCooldown ${d(s.swapCooldown)}, drainTimeout ${d(s.drainTimeout)}, maxWait ${d(s.maxWait)}, preemptAfter ${d(s.preemptAfter)}; every member priority 0.`,
    `- Models (Snooze defaults except concurrency): holdBudget ${d(t.holdBudget)} (503 past it), concurrency ${t.concurrency} per replica, queueDepth ${t.queueDepth}, sleepAfter ${d(t.sleepAfter)}, sleepLevel ${t.sleepLevel}, deepSleepAfter ${d(t.deepSleepAfter)}, warmup ${t.warmup}. Slot members start asleep at level 1; the background model starts awake.`,
    `- flexinfer-like: demand window ${d(flexInfer.demandWindow)}, recent window ${d(flexInfer.recentWindow)}, swap cooldown ${d(flexInfer.swapCooldown)} (assumptions in [slots.md](slots.md#the-flexinfer-like-policy)).`,
    `- Simulated engines (assumed, not measured; ±${config.models[0]!.engine.jitter * 100}% jitter on every start, wake and sleep): ${engines.join("; ")}.`,
  ].join("\n");
}

export interface Robustness {
  seeds: number[];
  met: { swaps: number; p95: number; lost: number; all: number };
  medians: { policy: string; swaps: number; holdP95Ms: number; holdP99Ms: number; refused: number }[];
}

export function robustnessText(r: Robustness): string {
  const n = r.seeds.length;
  const lines = [
    `The same trace shape with seeds ${r.seeds[0]}–${r.seeds.at(-1)} (${n} traces): sticky has fewer swaps than fifo in ${r.met.swaps}/${n}, the lowest p95 hold in ${r.met.p95}/${n}, lost no request in ${r.met.lost}/${n}; all three targets in ${r.met.all}/${n}.`,
    "",
    "| policy | median swaps | median hold p95 (s) | median hold p99 (s) | 503s, all traces |",
    "|---|--:|--:|--:|--:|",
  ];
  for (const m of r.medians)
    lines.push(
      `| ${m.policy} | ${fmt(m.swaps, 1)} | ${seconds(m.holdP95Ms)} | ${seconds(m.holdP99Ms)} | ${m.refused} |`,
    );
  return lines.join("\n");
}
