import { type Context, context, ROOT_CONTEXT, type Span, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Clock } from "../lib/clock.ts";
import { forgetSeries } from "../lib/forget-series.ts";
import type { Logger } from "../lib/log.ts";
import { activationBuckets } from "../lib/metrics-buckets.ts";
import { Counter, Gauge, Histogram, type Registry } from "../lib/prometheus.ts";
import type { Tier } from "../lib/replica-event.ts";
import type { SlotConfig } from "../lib/settings/index.ts";
import type { SlotStatus } from "../lib/slot-status.ts";
import { traceContextOf, tracer } from "../lib/tracing.ts";
import { GpuAccount, type LearningMetrics } from "./learning-metrics.ts";
import type { ModelController } from "./model-controller.ts";
import { decideSlot, isResident, type SlotMember } from "./slot-arbiter.ts";

export type { SlotStatus };

export interface SlotDeps {
  clock: Clock;
  log: Logger;
  metrics: SlotMetrics;
  /** Whether this slot may act right now (on Kubernetes: its Lease is renewed). */
  holding(): boolean;
  /** Where the slot's GPU-seconds are counted. */
  learning?: LearningMetrics;
  /**
   * The tiers of models moving into this slot (a reload's move) whose engines have not left their
   * old place yet: on the accelerator the slot now names, they hold it as a resident would.
   */
  arriving?(): { model: string; tier: Tier }[];
  /** A swap finished: the incumbent (`from`, a member key) left and the target (`to`) is ready. */
  swapped?(swap: {
    from: string;
    to: string;
    reason: string;
    durationMs: number;
    traceparent?: string;
    tracestate?: string;
  }): void;
}

/** A swap or grant in motion: the incumbent leaves, then the target activates. */
interface Transition {
  from?: string;
  to: string;
  reason: string;
  step: "draining" | "activating";
  startedAt: number;
  activatingAt?: number;
  /** A swap's span and its context; a grant of an empty slot has none (it is not a swap). */
  span?: Span;
  context?: Context;
  /** For a prewarm, not a request: the target's wake does not count as its activity. */
  prewarm?: boolean;
}

/**
 * The single writer of one slot (one exclusive accelerator shared by several models). The arbiter
 * (`decideSlot`) says who may be resident; each member's pass then runs with a cap on its awake
 * replicas: 0 for everyone but the resident, and 0 for the resident too while it yields in a swap.
 * The target is granted the slot only once the incumbent has no resident replica left, so two
 * members are never awake at once, and a sleep on the slot always ends before the next wake begins.
 */
export class Slot {
  config: SlotConfig;
  readonly members = new Map<string, ModelController>();
  private readonly deps: SlotDeps;
  private readonly log: Logger;
  /**
   * The slot in its metrics' `slot` label: its key, the name in local mode and `namespace/name` on
   * Kubernetes, as `snooze_slot_gpu_seconds_total` and its log lines name it. Found by an outside
   * tester: the other slot metrics said only the name, so two namespaces' `gpu0` shared one series.
   */
  private readonly label: string;
  private transition?: Transition;
  private residentSince = 0;
  private lastSwapAt = Number.NEGATIVE_INFINITY;
  private swaps = 0;
  private lastSwap?: SlotStatus["lastSwap"];
  private pending = false;
  private leading = false;
  private timer?: { cancel(): void };
  private maxResidents = 0;
  private readonly statusListeners: (() => void)[] = [];
  /** The accelerator's time awake (a member resident) and saved, against one always awake. */
  readonly gpu: GpuAccount;

  constructor(config: SlotConfig, deps: SlotDeps, logName = config.name) {
    this.config = config;
    this.deps = deps;
    this.log = deps.log.child({ slot: logName });
    this.label = logName;
    this.gpu = new GpuAccount((state, seconds) =>
      deps.learning?.slotGpuSeconds.inc({ slot: this.label, state }, seconds),
    );
  }

  get name(): string {
    return this.config.name;
  }

  /** Called after every evaluation (Kubernetes writes the Slot's status from it). */
  /** Whether this process arbitrates the slot now (it leads, and holds the slot's Lease). */
  get isLeading(): boolean {
    return this.leading && this.deps.holding();
  }

  onStatusChanged(listener: () => void): void {
    this.statusListeners.push(listener);
  }

  add(member: ModelController): void {
    this.members.set(member.key, member);
    this.changed();
  }

  remove(key: string): void {
    this.members.delete(key);
    // A member gone (a reload, a deleted Model) is no longer one of the slot's: its series go, its
    // swaps' too (they can no longer grow; left, a slot whose members changed for weeks kept them all).
    this.deps.metrics.resident.remove({ slot: this.label, model: key });
    forgetSeries(this.deps.metrics.swaps, { slot: this.label, from: key });
    forgetSeries(this.deps.metrics.swaps, { slot: this.label, to: key });
    this.changed();
  }

  /** The slot is gone (its last member left it): its series go with it. */
  forgetSeries(): void {
    for (const metric of Object.values(this.deps.metrics)) forgetSeries(metric, { slot: this.label });
    this.deps.learning?.forgetSlot(this.label);
  }

  lead(): void {
    this.leading = true;
    this.endTransition("leadership changed");
    this.residentSince = this.deps.clock.now();
    this.changed();
  }

  standDown(): void {
    this.leading = false;
    this.timer?.cancel();
    this.endTransition("leadership lost");
    // The slot's leader publishes who is resident: a process that no longer leads it says nothing
    // of it (its last word would stay, and another leader's beside it).
    for (const key of this.members.keys())
      this.deps.metrics.resident.remove({ slot: this.label, model: key });
    // Nor does it count the accelerator's seconds: its leader does (see GpuAccount.pause).
    this.gpu.pause(this.deps.clock.now());
  }

  /** Something about a member changed: look again, once, after the current turn. */
  changed(): void {
    if (!this.leading || this.pending) return;
    this.pending = true;
    // Outside whatever trace asked (see ModelController.changed): a swap is a trace of its own.
    queueMicrotask(() =>
      context.with(ROOT_CONTEXT, () => {
        this.pending = false;
        this.evaluate();
      }),
    );
  }

  status(): SlotStatus {
    const now = this.deps.clock.now();
    const views = [...this.members.values()].map((m) => m.slotView());
    const t = this.transition;
    return {
      name: this.config.name,
      policy: this.config.policy,
      members: views.map((v) => v.model).sort(),
      resident: (views.find((v) => isResident(v.tier)) ?? this.arrivingResidents()[0])?.model,
      ...(t
        ? { transition: { to: t.to, from: t.from, step: t.step, since: new Date(t.startedAt).toISOString() } }
        : {}),
      waiting: views
        .filter((v) => v.held > 0 && !isResident(v.tier))
        .map((v) => ({
          model: v.model,
          // Requests only, as `snooze status` counts them: a person's wake is named apart.
          held: v.held - (v.wake ? 1 : 0),
          ...(v.wake ? { wake: true as const } : {}),
          // Whole milliseconds: an activator in this process measures its oldest wait with a fraction.
          waitingMs: Math.max(0, Math.round(now - (v.heldSince ?? now))),
        })),
      swaps: this.swaps,
      ...(this.lastSwap ? { lastSwap: this.lastSwap } : {}),
      maxResidents: this.maxResidents,
      gpuSeconds: (() => {
        this.gpu.accrue(now);
        const { awake, saved } = this.gpu.seconds();
        return { awake, saved };
      })(),
    };
  }

  private evaluate(): void {
    if (!this.leading || !this.deps.holding()) return;
    this.timer?.cancel();
    const members = [...this.members.values()].filter((m) => m.isLeading);
    const views = members.map((m) => m.slotView());
    const residents = views.filter((v) => isResident(v.tier));
    // An engine of a model moving in still holds the accelerator: no member comes up beside it.
    const moving = this.arrivingResidents().length > 0;
    this.maxResidents = Math.max(this.maxResidents, residents.length);
    if (residents.length > 1)
      this.log.error("invariant broken: more than one resident", {
        residents: residents.map((r) => r.model),
      });
    for (const view of views)
      this.deps.metrics.resident.set({ slot: this.label, model: view.model }, isResident(view.tier) ? 1 : 0);
    const now = this.deps.clock.now();
    this.gpu.set(now, residents.length > 0 || moving ? 1 : 0, 0);
    const caps = new Map<string, number | undefined>(views.map((v) => [v.model, 0]));
    const t = this.transition;

    if (t?.step === "draining") {
      if (residents.some((r) => r.model === t.from) || moving) {
        // Still leaving (or an engine moving in still holds it; its model then joins, which looks
        // again): nobody else may come up yet.
      } else if (t.prewarm && views.some((v) => v.model !== t.to && v.held > 0)) {
        // A request came while the slot was being freed for a prewarm: the request goes first.
        this.observeRelease(t);
        this.endTransition("a request came; the prewarm gives way");
        this.arm(now + 1, now);
      } else if (residents.length === 0 && this.members.has(t.to)) {
        // A swap once begun finishes, even if the requests that asked for it went away.
        this.observeRelease(t);
        this.grant(t, now);
        caps.set(t.to, undefined);
      } else {
        this.observeRelease(t);
        this.endTransition("the target is gone", true);
      }
    } else if (t?.step === "activating") {
      const target = views.find((v) => v.model === t.to);
      caps.set(t.to, undefined);
      if (target?.tier === "ready") this.finish(t, now);
      else if (!target || !isResident(target.tier)) {
        // The activation failed (the target backs off) or the target left: the slot is free again.
        this.endTransition(`the target is ${target?.tier ?? "gone"}`, true);
        caps.set(t.to, 0);
        // Not at once: a member that cannot act this turn must not spin the slot.
        this.arm(now + 50, now);
      }
    } else if (residents.length > 0) {
      const resident = residents[0]!;
      caps.set(resident.model, undefined);
      const decision = this.decide(views, now);
      if (decision.kind === "swap") {
        const swap = this.begin(resident.model, decision.to, decision.reason, now, decision.prewarm);
        // The line carries the swap's trace ids (tracing.md: logs join the traces).
        context.with(swap.context ?? context.active(), () =>
          this.log.info("swapping", { from: resident.model, to: decision.to, reason: decision.reason }),
        );
        caps.set(resident.model, 0);
      } else if (decision.kind === "wait") this.arm(decision.at, now);
    } else if (moving) {
      // Nobody is granted the slot until the engines moving in have left (their model then joins).
    } else {
      const decision = this.decide(views, now);
      if (decision.kind === "grant" || decision.kind === "swap") {
        this.log.info("granting", { to: decision.to, reason: decision.reason });
        const started = this.begin(undefined, decision.to, decision.reason, now, decision.prewarm);
        this.grant(started, now);
        caps.set(decision.to, undefined);
      } else this.arm(decision.at, now);
    }
    for (const member of members) {
      member.cap = caps.get(member.key);
      member.parent =
        this.transition && (member.key === this.transition.to || member.key === this.transition.from)
          ? this.transition.context
          : undefined;
      member.pass();
    }
    for (const listener of this.statusListeners) listener();
  }

  /** The models moving in whose engines are still resident where they were (deps.arriving). */
  private arrivingResidents(): { model: string; tier: Tier }[] {
    return (this.deps.arriving?.() ?? []).filter((a) => !this.members.has(a.model) && isResident(a.tier));
  }

  private decide(views: SlotMember[], now: number) {
    return decideSlot({
      ...this.config,
      members: views,
      residentSince: this.residentSince,
      lastSwapAt: this.lastSwapAt,
      now,
    });
  }

  /**
   * A swap (or grant) begins. A swap is one span for all of it, a trace of its own (no one request
   * owns it), and requests held for the target link to it. A grant of an empty slot is not a swap:
   * the target's activation continues the trace of the request that asked for it, as outside a slot.
   */
  private begin(
    from: string | undefined,
    to: string,
    reason: string,
    now: number,
    prewarm?: boolean,
  ): Transition {
    const span =
      from === undefined
        ? undefined
        : tracer.startSpan(
            "snooze.swap",
            {
              root: true,
              attributes: {
                "snooze.slot": this.config.name,
                "snooze.swap.to": to,
                "snooze.swap.reason": reason,
                "snooze.swap.from": from,
              },
            },
            ROOT_CONTEXT,
          );
    const transition: Transition = {
      from,
      to,
      reason,
      step: "draining",
      startedAt: now,
      ...(span ? { span, context: trace.setSpan(ROOT_CONTEXT, span) } : {}),
      ...(prewarm ? { prewarm: true } : {}),
    };
    this.transition = transition;
    if (span) this.members.get(to)?.announce(traceContextOf(span));
    return transition;
  }

  private grant(t: Transition, now: number): void {
    t.step = "activating";
    t.activatingAt = now;
    this.residentSince = now;
    this.members.get(t.to)?.wantAwake(t.prewarm ? { prewarm: true } : undefined);
  }

  /** The incumbent left: its drain and sleep, for the swap metrics. */
  private observeRelease(t: Transition): void {
    const incumbent = t.from ? this.members.get(t.from) : undefined;
    if (!incumbent) return;
    const { phase } = this.deps.metrics;
    phase.observe({ slot: this.label, phase: "drain" }, incumbent.lastRelease.drainMs / 1000);
    phase.observe({ slot: this.label, phase: "sleep" }, incumbent.lastRelease.sleepMs / 1000);
  }

  /** The target is ready: the swap is done. */
  private finish(t: Transition, now: number): void {
    const { phase, swaps } = this.deps.metrics;
    this.residentSince = now;
    // A first grant of an empty slot is not a swap: none of the swap metrics counts it.
    if (t.from) {
      phase.observe({ slot: this.label, phase: "activate" }, (now - (t.activatingAt ?? now)) / 1000);
      this.lastSwapAt = now;
      this.swaps++;
      this.lastSwap = {
        from: t.from,
        to: t.to,
        at: new Date(now).toISOString(),
        durationMs: now - t.startedAt,
      };
      swaps.inc({ slot: this.label, from: t.from, to: t.to });
      phase.observe({ slot: this.label, phase: "total" }, (now - t.startedAt) / 1000);
      this.deps.swapped?.({
        from: t.from,
        to: t.to,
        reason: t.reason,
        durationMs: now - t.startedAt,
        ...(t.span ? traceContextOf(t.span) : {}),
      });
    }
    this.endTransition("ready");
  }

  /** Ends the transition under way; `failed`: its target never became ready (the swap's error). */
  private endTransition(outcome: string, failed = false): void {
    const t = this.transition;
    if (!t) return;
    this.transition = undefined;
    t.span?.setAttribute("snooze.swap.outcome", outcome);
    if (failed) t.span?.setStatus({ code: SpanStatusCode.ERROR, message: outcome });
    t.span?.end();
  }

  private arm(at: number, now: number): void {
    if (Number.isFinite(at))
      this.timer = this.deps.clock.setTimeout(() => this.changed(), Math.max(1, at - now));
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
