import { median, percentile } from "../stats.ts";
import type { SimResult } from "./simulator.ts";

/**
 * What the benchmark reports for one policy on one trace. Hold time is the
 * time a request waited in the activator: until dispatch, or until its 503
 * (so refusals count at the budget they used up, not as zero). GPU time is
 * the time the slot's members held a GPU (starting, waking, ready or
 * draining: one GPU for a slot, one each when they do not share), from the
 * start of the trace to the end of its last request.
 */
export interface PolicyResult {
  policy: string;
  requests: number;
  swaps: number;
  /** Median time from a swap's decision to its target being ready (drain, sleep, wake, warm-up). */
  swapMedianMs: number;
  holdP50Ms: number;
  holdP95Ms: number;
  holdP99Ms: number;
  holdMaxMs: number;
  served: number;
  /** 503s: hold budget spent or queue full. */
  refused: number;
  /** Dispatched, then cut because the engine was stopped under them. */
  cut: number;
  gpuMinutes: number;
  servedPerGpuMinute: number;
  /** The model on its own GPU: its requests, p95 hold and refusals. */
  background: { requests: number; holdP95Ms: number; refused: number };
  violations: string[];
}

export function summarizeRun(result: SimResult, slotModels: readonly string[]): PolicyResult {
  const inSlot = result.outcomes.filter((o) => slotModels.includes(o.model));
  const background = result.outcomes.filter((o) => !slotModels.includes(o.model));
  const holds = inSlot.map((o) => o.holdMs);
  const served = inSlot.filter((o) => o.result === "served").length;
  let gpuMs = 0;
  for (const model of slotModels) gpuMs += result.residentMs[model] ?? 0;
  const gpuMinutes = gpuMs / 60_000;
  return {
    policy: result.policy,
    requests: inSlot.length,
    swaps: result.swaps,
    swapMedianMs: median(
      result.transitions
        .filter((t) => t.kind === "swap" && t.readyAt !== undefined)
        .map((t) => t.readyAt! - t.decidedAt),
    ),
    holdP50Ms: percentile(holds, 50),
    holdP95Ms: percentile(holds, 95),
    holdP99Ms: percentile(holds, 99),
    holdMaxMs: Math.max(0, ...holds),
    served,
    refused: inSlot.filter((o) => o.result === "refused").length,
    cut: inSlot.filter((o) => o.result === "cut").length,
    gpuMinutes,
    servedPerGpuMinute: gpuMinutes > 0 ? served / gpuMinutes : Number.NaN,
    background: {
      requests: background.length,
      holdP95Ms: percentile(
        background.map((o) => o.holdMs),
        95,
      ),
      refused: background.filter((o) => o.result !== "served").length,
    },
    violations: result.violations,
  };
}

/** The targets, checked on one set of results. */
export interface TargetCheck {
  stickyFewerSwapsThanFifo: boolean;
  stickyLowestP95: boolean;
  stickyLostNone: boolean;
}

export function checkTargets(results: readonly PolicyResult[]): TargetCheck {
  const sticky = results.find((r) => r.policy === "sticky");
  const fifo = results.find((r) => r.policy === "fifo");
  if (!sticky || !fifo) throw new Error("the targets compare sticky with fifo");
  return {
    stickyFewerSwapsThanFifo: sticky.swaps < fifo.swaps,
    stickyLowestP95: results.every((r) => r === sticky || sticky.holdP95Ms < r.holdP95Ms),
    stickyLostNone: sticky.served === sticky.requests,
  };
}
