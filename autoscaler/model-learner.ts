import { type Context, context, isSpanContextValid, type Span, TraceFlags, trace } from "@opentelemetry/api";
import { formatDuration } from "../lib/duration.ts";
import {
  arrivalBins,
  decodeCounts,
  encodeCounts,
  gapBins,
  type LearningSnapshot,
  learningSnapshot,
} from "../lib/learning-snapshot.ts";
import type { LearningState } from "../lib/learning-state.ts";
import type { Logger } from "../lib/log.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { tracer } from "../lib/tracing.ts";
import {
  type ArrivalHistory,
  advance,
  binRates,
  dayMs,
  emptyHistory,
  minQuietMs,
  recordArrival,
  recordGap,
} from "./arrival-history.ts";
import type { LadderSettings } from "./ladder.ts";
import {
  chooseLadder,
  completeDurations,
  type LadderChoice,
  type MeasuredDurations,
} from "./learned-ladder.ts";
import { GpuAccount, type LearningMetrics } from "./learning-metrics.ts";
import { budgetLeft, charge, type PrewarmLedger, type PrewarmPlan, planPrewarm } from "./prewarm.ts";
import { planHold, planStage } from "./prewarm-hold.ts";

/**
 * What one model's controller learns, and the prewarms it runs: the arrival history and idle gaps
 * (from the load the activators report), the measured sleep, wake and start times, the learned
 * ladder that follows from them, the prewarm under way and the day's prewarm budget, and the
 * model's GPU-seconds. Every method takes the time as an input and sets no timer: the controller
 * owns the timers and asks here what to do.
 */
export interface LearnerDeps {
  model: string;
  log: Logger;
  metrics?: LearningMetrics;
}

/**
 * A prewarm under way: `learned` wakes ahead of a likely window, `staged` starts a cold model to
 * put it to sleep ahead of a likely request (`planStage`), `explicit` was asked for (an event),
 * `hint` is a client's listing or retrieval of models: a guess, so, like a learned one, its wake
 * is no activity and it sleeps at once when unused.
 */
interface Prewarm {
  kind: "learned" | "staged" | "explicit" | "hint";
  began: number;
  until: number;
  probability?: number;
  /** The model had a resident replica during it (only then does it cost budget). */
  awake: boolean;
  /**
   * Asked for (an event's `for`, a hint) while no replica was ready: kept this long from the first
   * ready, so a start or wake under way does not eat into it.
   */
  fromReadyMs?: number;
  span: Span;
  context: Context;
}

/** What the controller tells of the model for a prewarm decision. */
export interface PrewarmContext {
  budgetMs: number;
  /** Some replica is starting, waking, ready or draining. */
  resident: boolean;
  /** A replica is ready and the ladder would put it to sleep now. */
  sleepDue: boolean;
  /** A replica is ready (in flight or not). */
  ready: boolean;
  /**
   * No replica at all, none starting, and the user set no `zeroAfter` (which says how long an idle
   * engine may keep its process): a staged start may bring it to sleep ahead of a request.
   */
  mayStage: boolean;
  /** Nothing in flight or held (requests, not prewarms). */
  idle: boolean;
  /** A person asked for sleep or stop: no prewarm until the next request. */
  parked: boolean;
  /** Time from a decision to a ready replica, from the model's tier now. */
  leadMs: number;
  backoffUntil: number;
}

export interface PrewarmStep {
  /** 1 while the prewarm wants a replica awake: counted as a held request by the decision. */
  held: 0 | 1;
  /** Look again at this moment (Infinity: only when something changes). */
  nextAt: number;
}

export type { LearningState };

const smoothing = 0.3;

export class ModelLearner {
  history: ArrivalHistory;
  durations: MeasuredDurations = {};
  readonly gpu: GpuAccount;
  /** Prewarms by outcome; `asleep`: a staged start that reached its sleep before any request. */
  readonly counts = { hit: 0, wasted: 0, asleep: 0 };
  private readonly deps: LearnerDeps;
  private ledger: PrewarmLedger = { day: -1, spentMs: 0 };
  private active = false;
  private idleSince?: number;
  private watchingSince: number;
  private prewarm?: Prewarm;
  /** A learned prewarm ended unused then: a replica it left ready sleeps from that moment. */
  private wastedUntil?: number;
  private rates?: { version: number; rates: number[] };
  private planned?: { version: number; lead: number; budget: number; validUntil: number; plan: PrewarmPlan };
  private ladderCache?: { version: number; key: string; choice: LadderChoice | undefined };

  constructor(now: number, deps: LearnerDeps) {
    this.deps = deps;
    this.history = emptyHistory(now);
    this.watchingSince = now;
    this.gpu = new GpuAccount((state, seconds) =>
      deps.metrics?.gpuSeconds.inc({ model: deps.model, state }, seconds),
    );
  }

  // --- observations ---

  /** The model's real load (requests in flight or held; not prewarms or admin wakes) at `now`. */
  activity(now: number, busy: boolean): void {
    if (busy && !this.active) {
      this.active = true;
      if (this.idleSince !== undefined) {
        const gap = now - this.idleSince;
        recordGap(this.history, now, gap);
        if (gap >= minQuietMs) recordArrival(this.history, now);
      } else if (now - this.watchingSince >= minQuietMs) recordArrival(this.history, now);
      this.wastedUntil = undefined;
      if (this.prewarm) this.end(now, "hit");
    } else if (!busy && this.active) {
      this.active = false;
      this.idleSince = now;
    }
    advance(this.history, now);
  }

  /** A measured wake (from level 1 or 2), sleep (to level 1 or 2) or cold start. */
  measured(what: keyof MeasuredDurations, ms: number): void {
    if (!(ms >= 0) || !Number.isFinite(ms)) return;
    const before = this.durations[what];
    this.durations[what] = Math.round(before === undefined ? ms : before + smoothing * (ms - before));
  }

  /** An estimate for a wake or start before anything was measured for it, from what was. */
  estimate(what: keyof MeasuredDurations): number {
    // Measured: that is the estimate (decision passes ask on every load change; no scaling needed).
    const measured = this.durations[what];
    if (measured !== undefined && measured > 0) return measured;
    return completeDurations(this.durations)[what];
  }

  // --- the learned ladder ---

  /** The learned ladder for `config`, when it sets `wakeTarget` and enough idle gaps were seen. */
  ladder(config: ModelConfig, inSlot: boolean): LadderChoice | undefined {
    if (config.wakeTarget === undefined) return undefined;
    const key = JSON.stringify([
      config.wakeTarget,
      config.sleep,
      config.sleepAfter,
      config.sleepLevel,
      config.deepSleepAfter,
      config.zeroAfter,
      config.explicit ?? [],
      inSlot,
      this.durations,
    ]);
    const cache = this.ladderCache;
    if (cache && cache.version === this.history.version && cache.key === key) return cache.choice;
    const choice = chooseLadder({
      gaps: this.history.gaps,
      durations: this.durations,
      settings: { ...config, wakeTarget: config.wakeTarget },
      explicit: new Set(config.explicit ?? []),
      inSlot,
    });
    this.ladderCache = { version: this.history.version, key, choice };
    return choice;
  }

  /** The ladder settings to run with: the learned ones where they apply, else the model's own. */
  ladderSettings(config: ModelConfig, inSlot: boolean): ModelConfig {
    const choice = this.ladder(config, inSlot);
    return choice ? { ...config, ...(choice.settings satisfies LadderSettings) } : config;
  }

  // --- prewarm ---

  /** A prewarm is under way (learned or explicit). */
  get prewarming(): boolean {
    return this.prewarm !== undefined;
  }

  /**
   * When the prewarm under way ends, and whether it was guessed (learned, staged, a hint: its wake
   * was no activity, so the replica sleeps at once then). Undefined with none, or while its window
   * still waits for a replica to be ready to count from.
   */
  get prewarmEnd(): { until: number; guessed: boolean } | undefined {
    const p = this.prewarm;
    if (!p || p.fromReadyMs !== undefined) return undefined;
    return { until: p.until, guessed: p.kind !== "explicit" };
  }

  /**
   * A prewarm nobody asked for outright (learned, staged, a hint) runs and no request came yet:
   * its wake does not count as activity.
   */
  get guessedPrewarmOnly(): boolean {
    return this.prewarm !== undefined && this.prewarm.kind !== "explicit";
  }

  /** The span of the prewarm under way, for its activation to go under. */
  get prewarmContext(): Context | undefined {
    return this.prewarm?.context;
  }

  /**
   * Ready replicas sleep from this moment on (a learned prewarm that kept or woke them ended
   * unused): the ladder's idle clock counts from `floor` + sleepAfter at the latest.
   */
  readyFloor(sleepAfter: number): number | undefined {
    return this.wastedUntil === undefined ? undefined : this.wastedUntil - sleepAfter;
  }

  /** Decides, at a controller's pass, whether a prewarm runs; ends one whose window passed. */
  step(now: number, c: PrewarmContext): PrewarmStep {
    const p = this.prewarm;
    if (p) {
      if (c.resident) p.awake = true;
      if (p.fromReadyMs !== undefined && c.resident) {
        this.extend(p, now + p.fromReadyMs);
        if (c.ready) p.fromReadyMs = undefined;
      }
      if (c.parked) this.end(now, "wasted");
      else if (p.kind === "staged" && c.ready) {
        // Up: it sleeps at once, and the request it was started for wakes it.
        this.wastedUntil = now;
        this.end(now, "asleep");
      } else if (now >= p.until) {
        if (p.kind !== "explicit") this.wastedUntil = p.until;
        this.end(now, "wasted");
      } else return { held: 1, nextAt: p.until };
    }
    if (c.budgetMs <= 0 || c.parked || !c.idle) return { held: 0, nextAt: Number.POSITIVE_INFINITY };
    if (now < c.backoffUntil) return { held: 0, nextAt: c.backoffUntil };
    // An awake replica is kept only when the ladder would let it go now; a warming one needs nothing.
    if (c.resident && !c.sleepDue) return { held: 0, nextAt: Number.POSITIVE_INFINITY };
    const lead = c.resident ? 0 : c.leadMs;
    const plan = this.plan(now, lead, c.budgetMs);
    if (plan.kind === "now") {
      this.begin(now, "learned", plan.until, plan.probability, c.resident);
      return { held: 1, nextAt: plan.until };
    }
    let nextAt =
      plan.kind === "later" ? plan.at : Math.min(now + 6 * 3_600_000, (Math.floor(now / dayMs) + 1) * dayMs);
    if (c.mayStage) {
      const budgetLeftMs = this.budgetLeft(now, c.budgetMs);
      const stage = planStage({
        now,
        rates: this.currentRates(),
        exposureWeeks: this.history.exposureWeeks,
        leadMs: c.leadMs,
        budgetLeftMs,
      });
      if (stage.kind === "now") {
        // Past twice its lead (or the budget) the start is slow, not lost: the replica sleeps once it is up.
        const until = now + Math.min(2 * c.leadMs, budgetLeftMs);
        this.begin(now, "staged", until, stage.probability, false);
        return { held: 1, nextAt: until };
      }
      nextAt = Math.min(nextAt, stage.recheckAt);
    }
    return { held: 0, nextAt };
  }

  /**
   * Whether a sleeping model stays asleep rather than being stopped (or put to deeper sleep) now,
   * because a request is likely soon (`planHold`). Part of prewarm: only with a prewarm budget,
   * never for a model a person parked; it spends none of the budget (a sleeper holds no GPU).
   */
  holdAsleep(now: number, c: { budgetMs: number; parked: boolean; asleep: boolean }): PrewarmStep {
    if (c.budgetMs <= 0 || c.parked || !c.asleep) return { held: 0, nextAt: Number.POSITIVE_INFINITY };
    const plan = planHold({ now, rates: this.currentRates(), exposureWeeks: this.history.exposureWeeks });
    return { held: plan.hold ? 1 : 0, nextAt: plan.recheckAt };
  }

  /**
   * A prewarm asked for (a `dev.snooze.model.prewarm` event, or a hint): kept awake for `forMs`, or
   * for what is left of today's budget if that is less, from now when a replica is ready, else from
   * when one is. Returns how long it is kept.
   */
  explicit(
    now: number,
    forMs: number,
    budgetMs: number,
    model: { resident: boolean; ready: boolean },
    kind: "explicit" | "hint" = "explicit",
    caller?: Context,
  ): number {
    const p = this.prewarm;
    const reserved = p ? p.until - p.began : 0;
    const left = budgetLeft(this.ledger, budgetMs, now, reserved);
    if (p) {
      // Asked for outright, it counts as activity from now on, whatever it lengthens.
      if (kind === "explicit" && p.kind !== kind) {
        p.kind = kind;
        p.span.setAttribute("snooze.prewarm.kind", kind);
      }
      // One prewarm at a time: the one under way is lengthened, within the budget.
      const until = Math.min(Math.max(p.until, now + forMs), p.until + left);
      this.extend(p, until);
      if (!model.ready) p.fromReadyMs = Math.max(p.fromReadyMs ?? 0, until - now);
      return Math.max(0, until - now);
    }
    const keep = Math.max(0, Math.min(forMs, left));
    if (keep < forMs)
      this.deps.log.info("prewarm kept within the model's prewarm budget", {
        asked: formatDuration(forMs),
        kept: formatDuration(keep),
      });
    if (keep > 0) {
      this.begin(now, kind, now + keep, undefined, model.resident, caller);
      if (!model.ready) this.prewarm!.fromReadyMs = keep;
    }
    return keep;
  }

  /** Lengthens the prewarm under way to `until` (never shortens it). */
  private extend(p: Prewarm, until: number): void {
    if (until <= p.until) return;
    p.until = until;
    p.span.setAttribute("snooze.prewarm.until", new Date(until).toISOString());
  }

  budgetLeft(now: number, budgetMs: number): number {
    const p = this.prewarm;
    return budgetLeft(this.ledger, budgetMs, now, p ? p.until - p.began : 0);
  }

  /** Ends a prewarm under way (the model was closed or lost its leadership). */
  stop(now: number): void {
    if (this.prewarm) this.end(now, "wasted");
  }

  private plan(now: number, lead: number, budgetMs: number): PrewarmPlan {
    const budget = this.budgetLeft(now, budgetMs);
    const cached = this.planned;
    if (
      cached &&
      cached.version === this.history.version &&
      Math.abs(cached.lead - lead) < 1_000 &&
      cached.budget === budget &&
      now < cached.validUntil
    )
      return cached.plan;
    const plan = planPrewarm({
      now,
      rates: this.currentRates(),
      exposureWeeks: this.history.exposureWeeks,
      leadMs: lead,
      budgetLeftMs: budget,
    });
    // "Later" holds until its moment; "none" until the day (and so the budget) changes.
    const validUntil =
      plan.kind === "later" ? plan.at : plan.kind === "none" ? (Math.floor(now / dayMs) + 1) * dayMs : now;
    this.planned = { version: this.history.version, lead, budget, validUntil, plan };
    return plan;
  }

  private currentRates(): number[] {
    if (this.rates?.version !== this.history.version)
      this.rates = { version: this.history.version, rates: binRates(this.history) };
    return this.rates.rates;
  }

  private begin(
    now: number,
    kind: Prewarm["kind"],
    until: number,
    probability: number | undefined,
    awake: boolean,
    caller?: Context,
  ) {
    this.wastedUntil = undefined;
    // Asked for by a traced caller (an incoming event): in its trace, as a held request's activation
    // is; a caller its sampler passed over is linked instead. Else a trace of its own.
    const found = caller ? trace.getSpan(caller)?.spanContext() : undefined;
    const parent = found && isSpanContextValid(found) ? found : undefined;
    const sampled = parent !== undefined && (parent.traceFlags & TraceFlags.SAMPLED) !== 0;
    const span = tracer.startSpan(
      "snooze.prewarm",
      {
        root: !sampled,
        ...(parent && !sampled ? { links: [{ context: parent }] } : {}),
        attributes: {
          "snooze.model": this.deps.model,
          "snooze.prewarm.kind": kind,
          "snooze.prewarm.until": new Date(until).toISOString(),
          ...(probability !== undefined
            ? { "snooze.prewarm.probability": Math.round(probability * 100) / 100 }
            : {}),
        },
      },
      sampled ? caller : undefined,
    );
    this.prewarm = {
      kind,
      began: now,
      until,
      probability,
      awake,
      span,
      context: trace.setSpan(context.active(), span),
    };
    this.deps.log.info("prewarm", {
      kind,
      for: formatDuration(until - now),
      forMs: until - now,
      ...(probability !== undefined ? { probability: Math.round(probability * 100) / 100 } : {}),
    });
  }

  private end(now: number, outcome: "hit" | "wasted" | "asleep"): void {
    const p = this.prewarm;
    if (!p) return;
    this.prewarm = undefined;
    // Time the model was awake for it (a prewarm that never got its accelerator cost nothing).
    const spent = p.awake || outcome === "hit" ? Math.max(0, Math.min(now, p.until) - p.began) : 0;
    this.ledger = charge(this.ledger, p.began, spent);
    this.counts[outcome]++;
    this.deps.metrics?.prewarms.inc({ model: this.deps.model, outcome });
    p.span.setAttribute("snooze.prewarm.outcome", outcome);
    p.span.setAttribute("snooze.prewarm.spent_ms", spent);
    p.span.end();
    this.deps.log.info("prewarm ended", {
      kind: p.kind,
      outcome,
      spent: formatDuration(spent),
      spentMs: spent,
    });
  }

  // --- what others see ---

  state(now: number, config: ModelConfig, inSlot: boolean): LearningState {
    this.gpu.accrue(now);
    const choice = this.ladder(config, inSlot);
    const p = this.prewarm;
    return {
      gpuSeconds: this.gpu.seconds(),
      prewarms: {
        hit: this.counts.hit,
        wasted: this.counts.wasted,
        ...(this.counts.asleep > 0 ? { asleep: this.counts.asleep } : {}),
        budgetLeftMs: this.budgetLeft(now, config.prewarmBudget),
        ...(p ? { active: { kind: p.kind, until: new Date(p.until).toISOString() } } : {}),
      },
      ...(choice
        ? {
            ladder: {
              sleepAfter: formatDuration(choice.plan.sleepAfter),
              sleep:
                choice.plan.first === "stop" ? ("stop" as const) : (`level ${choice.plan.first}` as const),
              deepSleepAfter: formatDuration(choice.plan.deepSleepAfter),
              expectedAwakeSeconds: Math.round(choice.cost.awakeMs / 100) / 10,
              fixedAwakeSeconds: Math.round(choice.fixed.awakeMs / 100) / 10,
              missShare: Math.round(choice.cost.missShare * 1000) / 1000,
              gaps: Math.round(choice.gaps),
            },
          }
        : {}),
    };
  }

  // --- kept across restarts ---

  snapshot(now: number): LearningSnapshot {
    advance(this.history, now);
    const d = this.durations;
    const clamp = (ms: number | undefined) =>
      ms === undefined ? undefined : Math.min(86_400_000, Math.round(ms));
    const durations = Object.fromEntries(
      Object.entries({ wake1: d.wake1, wake2: d.wake2, sleep1: d.sleep1, sleep2: d.sleep2, start: d.start })
        .map(([k, v]) => [k, clamp(v)])
        .filter(([, v]) => v !== undefined),
    );
    const p = this.prewarm;
    const ledger = p ? charge(this.ledger, p.began, Math.min(now, p.until) - p.began) : this.ledger;
    return {
      version: 1,
      updated: new Date(now).toISOString(),
      exposureWeeks: Math.round(this.history.exposureWeeks * 1e4) / 1e4,
      arrivals: encodeCounts(this.history.weekly),
      gaps: encodeCounts(this.history.gaps),
      ...(Object.keys(durations).length > 0 ? { durations } : {}),
      ...(ledger.day >= 0
        ? {
            prewarm: {
              day: new Date(ledger.day * dayMs).toISOString().slice(0, 10),
              spentMs: Math.min(86_400_000, Math.round(ledger.spentMs)),
            },
          }
        : {}),
    };
  }

  /**
   * Takes up a history kept before a restart. The time in between decays it but does not count as
   * observed. Anything that does not parse is refused (with the reason) and the history starts empty.
   */
  restore(raw: unknown, now: number): { ok: true } | { ok: false; reason: string } {
    const parsed = learningSnapshot.safeParse(raw);
    if (!parsed.success)
      return {
        ok: false,
        reason: parsed.error.issues.map((i) => `${i.path.join(".") || "(record)"}: ${i.message}`).join("; "),
      };
    const s = parsed.data;
    const updated = Date.parse(s.updated);
    // A model that saw no arrival keeps the shared empty bins (arrival-history.ts).
    const history = emptyHistory(Math.min(updated, now));
    if (s.arrivals !== "") history.weekly = decodeCounts(s.arrivals, arrivalBins);
    history.exposureWeeks = s.exposureWeeks;
    history.gaps = decodeCounts(s.gaps, gapBins);
    history.version = this.history.version + 1;
    advance(history, now, false);
    history.version++;
    this.history = history;
    this.durations = { ...(s.durations ?? {}) };
    if (s.prewarm)
      this.ledger = { day: Math.floor(Date.parse(s.prewarm.day) / dayMs), spentMs: s.prewarm.spentMs };
    this.watchingSince = now;
    return { ok: true };
  }
}
