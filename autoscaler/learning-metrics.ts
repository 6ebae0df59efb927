import { forgetSeries } from "../lib/forget-series.ts";
import { Counter, type Registry } from "../lib/prometheus.ts";
import { modelScope } from "./model-scope.ts";

/** A counter as its writers use it. */
interface Increments<L extends string> {
  inc(labels: Record<L, string>, value?: number): void;
}

/** What the models' and slots' accounts write (`learningMetrics(...)`, or `.of(key)` for one model). */
export interface LearningMetrics {
  prewarms: Increments<"model" | "outcome">;
  gpuSeconds: Increments<"model" | "state">;
  slotGpuSeconds: Increments<"slot" | "state">;
  forgetSlot(slot: string): void;
}

/**
 * Metrics of what the control plane learned and what it saved: prewarms by outcome, and
 * GPU-seconds per model and per slot against an always-on baseline. `collect` brings the running
 * totals up to the moment of the scrape.
 */
export function learningMetrics(
  registry: Registry,
  collect: { models?(): void; slots?(): void } = {},
  { namespaced = false }: { namespaced?: boolean } = {},
) {
  const scope = modelScope(namespaced);
  const metrics = {
    prewarms: new Counter({
      name: "snooze_prewarms_total",
      help: "Prewarms (a wake, or a replica kept awake, ahead of a predicted or announced request), by outcome: hit (a request arrived while it was awake from the prewarm), wasted, or asleep (a staged start of a cold model that reached its sleep before a request came).",
      labelNames: ["model", ...scope.labelNames, "outcome"],
      registers: [registry],
    }),
    gpuSeconds: new Counter({
      name: "snooze_gpu_seconds_total",
      help: "Replica-seconds of each model by state: awake (starting, waking, ready or draining: holding an accelerator), asleep (level 1 or 2), saved (no replica awake, against one replica always awake).",
      labelNames: ["model", ...scope.labelNames, "state"],
      registers: [registry],
      collect: collect.models,
    }),
    slotGpuSeconds: new Counter({
      name: "snooze_slot_gpu_seconds_total",
      help: "Seconds of each slot's accelerator by state: awake (a member is resident) or saved (no member resident, against one always awake).",
      labelNames: ["slot", "state"],
      registers: [registry],
      collect: collect.slots,
    }),
  };
  const forgetSlot = (slot: string) => forgetSeries(metrics.slotGpuSeconds, { slot });
  return {
    ...metrics,
    forgetSlot,
    /** What the account of the model `key` writes, in its own series (its namespace on Kubernetes). */
    of(key: string): LearningMetrics {
      const own = scope.of(key);
      return {
        prewarms: { inc: (labels, value) => metrics.prewarms.inc({ ...labels, ...own }, value) },
        gpuSeconds: { inc: (labels, value) => metrics.gpuSeconds.inc({ ...labels, ...own }, value) },
        slotGpuSeconds: metrics.slotGpuSeconds,
        forgetSlot,
      };
    },
    /** A model gone for good: its series go (see activator/metrics.ts `forget`). */
    forgetModel(model: string, key?: string): void {
      forgetSeries(metrics.prewarms, { model, ...scope.of(key) });
      forgetSeries(metrics.gpuSeconds, { model, ...scope.of(key) });
    },
  };
}

/**
 * Time awake, asleep and saved of one model (replicas) or one slot (its accelerator): the time
 * since the last change is counted at the counts that held during it, then the new counts apply.
 */
export class GpuAccount {
  awakeMs = 0;
  asleepMs = 0;
  savedMs = 0;
  private at?: number;
  private awake = 0;
  private asleep = 0;
  private readonly onAccrue?: (state: "awake" | "asleep" | "saved", seconds: number) => void;

  constructor(onAccrue?: (state: "awake" | "asleep" | "saved", seconds: number) => void) {
    this.onAccrue = onAccrue;
  }

  /** From `now` on, `awake` replicas hold an accelerator and `asleep` ones sleep. */
  set(now: number, awake: number, asleep: number): void {
    this.accrue(now);
    this.at ??= now;
    this.awake = awake;
    this.asleep = asleep;
  }

  /**
   * Counts the time up to `now`, then nothing until the next `set`: the process no longer leads
   * the model or slot (its Lease went to another replica, or it shuts down), so the seconds from now
   * on are the new leader's to count, not also this process's, from the last state it saw.
   */
  pause(now: number): void {
    this.accrue(now);
    this.at = undefined;
    this.awake = 0;
    this.asleep = 0;
  }

  /**
   * Counts the time up to `now` (a scrape, a status read); nothing before the first `set` or after
   * a `pause` (a process that never led the model, or no longer does, counts none of its time).
   */
  accrue(now: number): void {
    if (this.at !== undefined && now > this.at) {
      const dt = now - this.at;
      const awake = dt * this.awake;
      const asleep = dt * this.asleep;
      const saved = dt * Math.max(0, 1 - this.awake);
      this.awakeMs += awake;
      this.asleepMs += asleep;
      this.savedMs += saved;
      if (awake > 0) this.onAccrue?.("awake", awake / 1000);
      if (asleep > 0) this.onAccrue?.("asleep", asleep / 1000);
      if (saved > 0) this.onAccrue?.("saved", saved / 1000);
    }
    if (this.at !== undefined && now > this.at) this.at = now;
  }

  seconds(): { awake: number; asleep: number; saved: number } {
    const s = (ms: number) => Math.round(ms / 100) / 10;
    return { awake: s(this.awakeMs), asleep: s(this.asleepMs), saved: s(this.savedMs) };
  }
}
