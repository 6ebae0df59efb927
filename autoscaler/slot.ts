import { context, trace } from "@opentelemetry/api";
import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import type { Clock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";
import { activationBuckets } from "../lib/metrics-buckets.ts";
import type { SlotConfig } from "../lib/settings/index.ts";
import { traceparentOf, tracer } from "../lib/tracing.ts";
import type { ModelController } from "./model-controller.ts";
import { decideSlot, isResident, type SlotDecision } from "./slot-arbiter.ts";

/** What the admin API shows of a slot. */
export interface SlotStatus {
  name: string;
  policy: string;
  resident?: string;
  transition?: { to: string; from?: string; since: string };
  waiting: { model: string; held: number; waitingMs: number }[];
  swaps: number;
  lastSwap?: { from: string; to: string; at: string; durationMs: number };
}

const selfHealInterval = 30_000;

/**
 * The single writer of one slot: it asks the arbiter who should hold the
 * accelerator and carries out grants and swaps one at a time, so a sleep on
 * the slot always finishes before the next wake or start begins.
 */
export class Slot {
  readonly config: SlotConfig;
  private readonly members = new Map<string, ModelController>();
  private readonly clock: Clock;
  private readonly log: Logger;
  private readonly metrics: SlotMetrics;
  private busy = false;
  private pending = false;
  private closed = false;
  private timer?: { cancel(): void };
  private readonly healer: NodeJS.Timeout;
  private residentSince = 0;
  private lastSwapAt = Number.NEGATIVE_INFINITY;
  private transition?: SlotStatus["transition"];
  private swaps = 0;
  private lastSwap?: SlotStatus["lastSwap"];

  constructor(config: SlotConfig, deps: { clock: Clock; log: Logger; metrics: SlotMetrics }) {
    this.config = config;
    this.clock = deps.clock;
    this.log = deps.log.child({ slot: config.name });
    this.metrics = deps.metrics;
    this.healer = setInterval(() => this.selfHeal(), selfHealInterval);
    this.healer.unref();
  }

  add(member: ModelController): void {
    this.members.set(member.config.id, member);
  }

  /** Something about a member changed: look again, once, after the current turn. */
  changed(): void {
    if (this.pending || this.closed) return;
    this.pending = true;
    queueMicrotask(() => {
      this.pending = false;
      this.evaluate();
    });
  }

  status(): SlotStatus {
    const now = this.clock.now();
    const views = [...this.members.values()].map((m) => m.slotView());
    return {
      name: this.config.name,
      policy: this.config.policy,
      resident: views.find((v) => isResident(v.tier))?.model,
      transition: this.transition,
      waiting: views
        .filter((v) => v.held > 0 && !isResident(v.tier))
        .map((v) => ({ model: v.model, held: v.held, waitingMs: now - (v.heldSince ?? now) })),
      swaps: this.swaps,
      lastSwap: this.lastSwap,
    };
  }

  close(): void {
    this.closed = true;
    this.timer?.cancel();
    clearInterval(this.healer);
  }

  private evaluate(): void {
    if (this.busy || this.closed) return;
    this.timer?.cancel();
    const views = [...this.members.values()].map((m) => m.slotView());
    const residents = views.filter((v) => isResident(v.tier));
    if (residents.length > 1)
      this.log.error("invariant broken: more than one resident", {
        residents: residents.map((r) => r.model),
      });
    for (const view of views)
      this.metrics.resident.set({ slot: this.config.name, model: view.model }, isResident(view.tier) ? 1 : 0);
    const now = this.clock.now();
    const decision = decideSlot({
      ...this.config,
      members: views,
      residentSince: this.residentSince,
      lastSwapAt: this.lastSwapAt,
      now,
    });
    if (decision.kind === "wait") {
      if (Number.isFinite(decision.at))
        this.timer = this.clock.setTimeout(() => this.evaluate(), Math.max(1, decision.at - now));
      return;
    }
    this.busy = true;
    void this.carryOut(decision, residents[0]?.model).finally(() => {
      this.busy = false;
      this.changed();
    });
  }

  /** A grant activates the target; a swap first drains and sleeps the resident, then activates the target. */
  private async carryOut(
    decision: Exclude<SlotDecision, { kind: "wait" }>,
    from: string | undefined,
  ): Promise<void> {
    const target = this.members.get(decision.to)!;
    const started = this.clock.now();
    this.transition = { to: decision.to, from, since: new Date(started).toISOString() };
    const span = tracer.startSpan("snooze.swap", {
      root: true,
      attributes: {
        "snooze.slot": this.config.name,
        "snooze.swap.to": decision.to,
        "snooze.swap.reason": decision.reason,
        ...(from ? { "snooze.swap.from": from } : {}),
      },
    });
    const parent = trace.setSpan(context.active(), span);
    // Requests held for the target link to this swap from now on.
    target.announce(traceparentOf(span));
    this.log.info(decision.kind === "swap" ? "swapping" : "granting", {
      from,
      to: decision.to,
      reason: decision.reason,
    });
    try {
      if (decision.kind === "swap" && from) {
        const incumbent = this.members.get(from)!;
        await incumbent.yieldSlot(this.config.drainTimeout, parent);
        this.metrics.phase.observe(
          { slot: this.config.name, phase: "drain" },
          incumbent.lastRelease.drainMs / 1000,
        );
        this.metrics.phase.observe(
          { slot: this.config.name, phase: "sleep" },
          incumbent.lastRelease.sleepMs / 1000,
        );
        if (isResident(incumbent.currentTier)) {
          this.log.warn("the incumbent did not leave the slot; the swap is called off", {
            from,
            tier: incumbent.currentTier,
          });
          return;
        }
      }
      const activating = this.clock.now();
      await target.activateForSlot(parent);
      this.metrics.phase.observe(
        { slot: this.config.name, phase: "activate" },
        (this.clock.now() - activating) / 1000,
      );
      const finished = this.clock.now();
      this.residentSince = finished;
      if (decision.kind === "swap" && from) {
        this.lastSwapAt = finished;
        this.swaps++;
        this.lastSwap = {
          from,
          to: decision.to,
          at: new Date(finished).toISOString(),
          durationMs: finished - started,
        };
        this.metrics.swaps.inc({ slot: this.config.name, from, to: decision.to });
        this.metrics.phase.observe({ slot: this.config.name, phase: "total" }, (finished - started) / 1000);
      }
      span.setAttribute("snooze.swap.outcome", target.currentTier);
    } finally {
      this.transition = undefined;
      span.end();
    }
  }

  private selfHeal(): void {
    for (const member of this.members.values())
      if (member.currentTier === "ready") void member.recheckResident();
  }
}

export function slotMetrics(registry: Registry) {
  return {
    resident: new Gauge({
      name: "snooze_slot_resident",
      help: "1 for the member that holds the slot's accelerator, 0 for the others.",
      labelNames: ["slot", "model"],
      registers: [registry],
    }),
    swaps: new Counter({
      name: "snooze_slot_swaps_total",
      help: "Swaps of the resident of a slot, by from and to.",
      labelNames: ["slot", "from", "to"],
      registers: [registry],
    }),
    phase: new Histogram({
      name: "snooze_slot_swap_duration_seconds",
      help: "Duration of swap phases: drain and sleep of the incumbent, activate (wake or start of the target), total.",
      labelNames: ["slot", "phase"],
      buckets: activationBuckets,
      registers: [registry],
    }),
  };
}

export type SlotMetrics = ReturnType<typeof slotMetrics>;
