import { type Context, context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import type { DemandLoad, LoadReport } from "../lib/control-plane.ts";
import type { Logger } from "../lib/log.ts";
import { isAsleep, type ReplicaEvent, type Tier } from "../lib/replica-event.ts";
import { RewriteBackoff } from "../lib/rewrite-backoff.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { endActivation, inActivation, startActivation } from "./activation-trace.ts";
import { ActivatorLoads, type ModelLoad } from "./activator-loads.ts";
import { backoffMs, crashLoopError, withCrash } from "./crash-backoff.ts";
import type { FlowReport } from "./demand-metric.ts";
import { burstInFlight, decideReplicas, keptFor } from "./horizontal.ts";
import { decideTier } from "./ladder.ts";
import type {
  HandOver,
  ModelControllerDeps,
  ModelState,
  ModelTarget,
  ParkOutcome,
} from "./model-controller-api.ts";
import { ModelLearner } from "./model-learner.ts";
import type { ModelObservation } from "./model-status.ts";
import { mostAwake, plannedChange, replicaEvent } from "./model-view.ts";
import { ModelWaiters } from "./model-waiters.ts";
import { NotLeading } from "./operation-errors.ts";
import { park, parkTimeoutMs, quiet } from "./park.ts";
import { passLadder, prewarmStep, tierSettings } from "./pass-ladder.ts";
import { type Departure, StartFailed } from "./platform.ts";
import { act, replaceOutdated, sleepUnwanted, stopUnwanted } from "./replica-actions.ts";
import { deepen } from "./replica-deepen.ts";
import { abandonCalls, exitNoticeMs } from "./replica-engine-calls.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import { recheck } from "./replica-recheck.ts";
import { type Activation, failedOperationCoolMs, type ReplicaRecord } from "./replica-record.ts";
import { syncRecords } from "./replica-records.ts";
import { releaseSpared, removeReplicas, startNotBegun } from "./replica-scaling.ts";
import { reportNeedsPass } from "./report-pass.ts";
import { isResident, type SlotMember } from "./slot-arbiter.ts";
import { writeTier } from "./tier-writes.ts";
import { nextStreak, type WaitStreak } from "./wait-streak.ts";

/** How often ready engines are rechecked (alive, awake), and how long each check may take. */
const selfHealIntervalMs = 30_000;
const selfHealCheckMs = 5_000;

/**
 * How long a workload the platform says is missing may be a cache catching up (a Model seen a
 * moment before its Deployment, both applied at once) before a held request is told it is missing;
 * also the least time between two such failures while it stays missing.
 */
export const missingWorkloadGraceMs = 5_000;

/**
 * Drives the replicas of one model: the horizontal decision (how many awake, which move) and each
 * replica's tier ladder, from the pure `decideReplicas`, on an injected clock. Each replica's
 * operation (finish a start, wake, drain then sleep, deepen, stop) runs on its own lifetime: no
 * client connection can abort it. The same controller runs on both platforms; the platform
 * (processes, or pods and scale subresources) sits below it.
 *
 * It is the model's actor: it owns the state and every timer, runs the pass, and delegates the
 * rest to the modules below it (docs/architecture.md): the operations (replica-*.ts), the tier
 * writes, the pure projections and rules. Members without `private` are what those modules read
 * or move through their host interfaces (`ReplicaOps` and the like), not for its callers.
 */
export class ModelController implements ReplicaOps {
  private target: ModelTarget;
  readonly deps: ModelControllerDeps;
  readonly log: Logger;
  leadership = 0;
  private leading = false;
  readonly records = new Map<string, ReplicaRecord>();
  /** Each activator's word on this model's load. */
  readonly loads: ActivatorLoads;
  /** Why replicas left on their own, as the platform said, until the records notice. */
  readonly departures = new Map<string, string>();
  lastActive: number;
  /**
   * When the model last had no replica (its last one left, or the controller began): what its
   * `cold` tier is dated from when it is told again with no replica (a swap's announcement).
   */
  coldSince: number;
  failures = 0;
  private crashes: number[] = [];
  backoffUntil = 0;
  /** When a replica's sleep or stop was last sent (past the point a request can take it back). */
  releaseSentAt?: number;
  /**
   * Engines' sleeps sent and not answered yet: a person's sleep waits for their answers, even when
   * the replica is gone meanwhile (an engine that died mid-sleep is a failed sleep, not a done one).
   */
  sleepsUnderWay = 0;
  private healer?: { cancel(): void };
  /** The last sleep call that failed (its engine was stopped instead): when, and why. */
  sleepFailure?: { at: number; reason: string };
  lastError?: string;
  /** While a slot member waits for its slot: since when, across its requests (wait-streak.ts). */
  private waitStreak?: WaitStreak;
  lastWakeMs: { 1?: number; 2?: number } = {};
  /** The level of the last wake measured: the one `lastWakeMs` shows. */
  lastWakeLevel?: 1 | 2;
  lastStartMs?: number;
  scaling = false;
  /** After a scale that failed (not a conflict): no scale until its back-off is over (replica-scaling.ts). */
  readonly scaleRetry: RewriteBackoff;
  scaleOverride?: { replicas: number; until: number };
  /** Starts asked for whose replica has not appeared yet, oldest first. */
  readonly pendingStarts: Activation[] = [];
  private timer?: { cancel(): void };
  private pendingPass = false;
  /** The last pass ran to its end (its timer covers what is due later) and nothing changed since. */
  private passed = false;
  /** The last pass saw nothing in flight and nothing held (report-pass.ts). */
  private decidedIdle = false;
  /** The last burst of held requests still running, as of the last pass (`burstInFlight`). */
  private burst = 0;
  private closed = false;
  /** A person asked for a wake: wanted as if a request were held, until a replica is ready. */
  private wakeWanted = false;
  /** Since when `wakeWanted`: it waits for a slot as a request held since then would. */
  private wakeWantedSince = 0;
  /** A person asked for sleep (or stop): no awake replica until the next request. */
  parked?: 1 | 2 | "stop";
  /** How many sleeps and stops people asked for: a later one replaces an earlier one. */
  parkAsks = 0;
  /** The waits on this model: a person's wake, sleep or stop, an operation's. */
  readonly waiters: ModelWaiters;
  /** The trace of the request whose demand will cause the next activation. */
  private callerContext?: Context;
  /** The slot's limit on awake replicas, set before each pass of a slot member. */
  cap?: number;
  /** The slot's swap this model takes part in: its drain, sleep and activation spans go under it. */
  parent?: Context;
  /** Phases of the last drain-then-sleep, for the slot's swap metrics. */
  lastRelease = { drainMs: 0, sleepMs: 0 };
  readonly counts = { tierWrites: 0, scales: 0 };
  /** What this model's traffic taught: arrivals, idle gaps, durations, prewarms, GPU-seconds. */
  private learnerOf: ModelLearner;
  /** An explicit prewarm (an event's, not a hint) asked for a wake (at prewarm priority), until a replica is ready. */
  prewarmWake = false;
  private snapshotCache?: { at: number; value: ReturnType<ModelLearner["snapshot"]> };
  /** The workload the platform says is missing: since when, why, and when a start last failed on it. */
  private absent?: { since: number; reason: string; failedAt?: number };

  constructor(target: ModelTarget, deps: ModelControllerDeps) {
    this.target = target;
    this.deps = deps;
    this.log = deps.log.child({
      model: target.config.id,
      ...(target.key !== target.config.id ? { object: target.key } : {}),
    });
    this.loads = new ActivatorLoads(deps.activatorExpiryMs);
    this.scaleRetry = new RewriteBackoff(deps.clock);
    this.waiters = new ModelWaiters(deps.clock, () => !this.closed && this.leading);
    this.lastActive = deps.clock.now();
    this.coldSince = deps.clock.now();
    this.learnerOf = new ModelLearner(deps.clock.now(), {
      model: target.config.id,
      log: this.log,
      metrics: deps.learning,
    });
  }

  get id(): string {
    return this.target.config.id;
  }

  /** What this model's traffic taught: arrivals, idle gaps, durations, prewarms, GPU-seconds. */
  get learner(): ModelLearner {
    return this.learnerOf;
  }

  /**
   * What the model's next controller takes over from this one (a reload moves the model to another
   * slot, under a new controller): call it before this one closes, which ends its prewarm.
   */
  handOver(): HandOver {
    return {
      learner: this.learnerOf,
      lastStartMs: this.lastStartMs,
      lastWakeMs: { ...this.lastWakeMs },
      lastWakeLevel: this.lastWakeLevel,
      wake: this.wakeWanted,
    };
  }

  /**
   * The same model, from its controller before this one (`handOver`): what that one measured and
   * learned goes on here, as it would have for a model that stayed (found by a probe: after a move
   * `snooze status` said nothing of the last start, its GPU time began again at 0, and Retry-After
   * fell back to a first start's guess); an explicit prewarm's window with it. So does a person's
   * wake asked while the one before drained (it could run no replica): found by a probe too,
   * `snooze wake` during a move heard the model was cold again, and it stayed cold.
   */
  takeOver(from: HandOver): void {
    this.learnerOf = from.learner;
    this.lastStartMs = from.lastStartMs;
    this.lastWakeMs = from.lastWakeMs;
    this.lastWakeLevel = from.lastWakeLevel;
    if (from.wake) this.wantAwake();
    this.changed();
  }

  get key(): string {
    return this.target.key;
  }

  get config(): ModelConfig {
    return this.target.config;
  }

  get precedence(): string | undefined {
    return this.target.precedence;
  }

  get isLeading(): boolean {
    return this.leading;
  }

  update(target: ModelTarget): void {
    this.target = target;
    this.changed();
  }

  /** This controller may act: rebuild each replica's state from the platform and look. */
  lead(): void {
    this.leadership++;
    this.leading = true;
    this.records.clear();
    this.accountTiers();
    this.lastActive = this.deps.clock.now();
    this.armHealer();
    this.changed();
  }

  /**
   * Self-heal, every 30 s: a ready engine that froze or died unnoticed would make every request
   * wait for firstByteTimeout (and, in a slot, hold the accelerator for ever); rechecked, it is
   * replaced.
   */
  private armHealer(): void {
    this.healer?.cancel();
    const intervalMs = this.deps.selfHealIntervalMs ?? selfHealIntervalMs;
    if (!Number.isFinite(intervalMs)) return;
    this.healer = this.deps.clock.setTimeout(() => {
      if (!this.leading || this.closed) return;
      this.recheckReady();
      this.armHealer();
    }, intervalMs);
  }

  /** Stop acting at once; running operations drop at their next write. */
  standDown(): void {
    this.leadership++;
    this.leading = false;
    this.timer?.cancel();
    this.healer?.cancel();
    this.scaleRetry.reset();
    // Activations under way end here (outcome `stopped`): their spans must not stay open for ever.
    // Their engine calls are given up too: an open warm-up or wake would hold up the engine's own
    // graceful stop (Snooze's shutdown) until its stop grace ran out.
    for (const record of this.records.values()) {
      endActivation(this, record, "stopped");
      abandonCalls(record, new NotLeading());
    }
    this.records.clear();
    this.accountTiers();
    this.learner.stop(this.deps.clock.now());
    this.prewarmWake = false;
    for (const activation of this.pendingStarts.splice(0)) {
      activation.startSpan?.end();
      activation.span.setAttribute("snooze.activation.outcome", "stopped");
      activation.span.end();
    }
  }

  /**
   * Stops acting. `enginesStop`: the platform stops every engine next (Snooze's own shutdown in
   * local mode), so each replica is reported cold now, its `stopped` CloudEvent included, rather
   * than left ready in the eyes of every consumer. On Kubernetes the pods stay: nothing is said.
   */
  close(enginesStop = false): void {
    this.closed = true;
    if (enginesStop && this.leading)
      for (const record of this.records.values()) {
        const from = record.tier;
        if (from === "cold") continue;
        endActivation(this, record, "stopped");
        record.tier = "cold";
        record.since = this.deps.clock.now();
        this.deps.metrics.transition(this.id, from, "cold");
        this.log.info("tier", { replica: record.replica.id, from, to: "cold", why: "Snooze stops" });
        this.emitFor(record);
      }
    this.standDown();
    this.waiters.wake();
  }

  // --- load from activators ---

  /** A request is held in `activator`: act now. */
  demand(activator: string, unreachable?: string, caller?: Context, load?: DemandLoad): void {
    const now = this.deps.clock.now();
    // The held request's trace: the activation it causes continues it (explicitly, not by luck of
    // whichever async context queued the next pass).
    if (caller && trace.getSpan(caller)) this.callerContext = caller;
    this.loads.demand(activator, now, load);
    this.lastActive = now;
    this.parked = undefined;
    this.learner.activity(now, true);
    if (unreachable) {
      const record = this.records.get(unreachable);
      // An activator's connection failed: the engine may be dying, its exit not yet seen.
      if (record && !record.busy)
        this.operate(record, "recheck", () => recheck(this, record, undefined, exitNoticeMs));
    }
    this.changed();
  }

  /** An activator's stats report (ActivatorLoads.report). */
  stats(activator: string, report: LoadReport): void {
    const { inFlight, held, flow } = report;
    const now = this.deps.clock.now();
    const before = this.loads.get(activator);
    if (
      before !== undefined &&
      !reportNeedsPass({
        before,
        inFlight,
        held,
        windowed: flow !== undefined,
        atRest: this.atRest(),
        timerCoversTime: this.timerCoversTime(),
        decidedIdle: this.decidedIdle,
      })
    ) {
      // Nothing held, before or now: only the requests in flight and the time are new (an
      // activator's expiry counts from it). Busy, or just done, is activity, as below; what the
      // report changes besides (the history's exposure, waits on a report) happens as below too.
      if (inFlight > 0 || before.inFlight > 0) this.lastActive = now;
      this.loads.refresh(before, now, inFlight, report.routed);
      this.learner.activity(now, this.loads.busyWithRequests(now));
      this.waiters.wake();
      return;
    }
    this.loads.report(activator, now, report);
    this.learner.activity(now, this.loads.busyWithRequests(now));
    // The report that says the work ended counts as activity too: the idle clock starts there.
    if (inFlight > 0 || held > 0 || (before && (before.inFlight > 0 || before.held > 0))) {
      this.lastActive = now;
      // A request held anew ends a person's sleep or stop; one held before it was asked does not
      // (it is served, then the model sleeps or stops).
      if (held > 0 && !(before && before.held > 0)) this.parked = undefined;
    }
    this.waiters.wake();
    this.changed();
  }

  /** Nothing under way and the last pass's timer armed for what is due (report-pass.ts). */
  private atRest(): boolean {
    if (!this.passed || this.scaling || this.scaleOverride !== undefined) return false;
    if (this.wakeWanted || this.pendingStarts.length > 0) return false;
    for (const record of this.records.values()) if (record.busy) return false;
    return true;
  }

  /** The controller's own timer is all that time changes in its decisions (report-pass.ts). */
  private timerCoversTime(): boolean {
    return (
      this.deps.slot === undefined &&
      this.deps.statusChanged === undefined &&
      this.config.wakeTarget === undefined &&
      this.config.prewarmBudget <= 0
    );
  }

  /** The model's load, summed over the activators that reported recently. */
  load(now = this.deps.clock.now()): ModelLoad {
    return this.loads.total(
      now,
      this.wakeWanted ? { held: 1, heldSince: this.wakeWantedSince } : { held: 0 },
    );
  }

  /** Each live activator's recent stats reports with running totals (the demand metric's input). */
  flowReports(now = this.deps.clock.now()): FlowReport[][] {
    return this.loads.flowReports(now);
  }

  /** How long a new replica takes to serve: the last start measured, else the learned estimate. */
  startEstimateMs(): number | undefined {
    return this.lastStartMs ?? this.learner.estimate("start");
  }

  // --- what others see ---

  /** The model's tier: its most awake replica's (pending replicas count as starting). */
  get tier(): Tier {
    return mostAwake(this.records.values(), this.pendingReplicas()).tier;
  }

  /** This member as its slot's arbiter sees it. */
  slotView(): SlotMember {
    if (this.leading) syncRecords(this);
    const now = this.deps.clock.now();
    const load = this.load(now);
    const idle = load.inFlight === 0 && load.held === 0;
    const heldSince = load.held > 0 ? load.heldSince : undefined;
    // A resident's own held requests wait for room on it, not for the slot: their age is theirs.
    this.waitStreak = isResident(this.tier) ? undefined : nextStreak(this.waitStreak, heldSince, now);
    return {
      model: this.key,
      priority: this.config.priority,
      tier: this.tier,
      inFlight: load.inFlight,
      held: load.held,
      heldSince: heldSince !== undefined && this.waitStreak ? this.waitStreak.since : heldSince,
      ...(this.wakeWanted ? { wake: true } : {}),
      backoffUntil: this.backoffUntil,
      ...(idle && (this.learner.prewarming || this.prewarmWake) ? { prewarm: true } : {}),
      ...(idle ? { idleSince: this.lastActive } : {}),
    };
  }

  /** An event for each replica now, for new watchers. */
  events(): ReplicaEvent[] {
    return [...this.records.values()].map((r) => replicaEvent(this.id, this.backoffUntil, r));
  }

  /** What the published status is computed from (the Model's status on Kubernetes). */
  observation(): Omit<ModelObservation, "selector" | "generation" | "previous"> {
    return {
      replicas: [...this.records.values()].map((r) => ({
        pod: r.replica.id,
        tier: r.tier,
        since: r.since,
        podReady: r.replica.up,
      })),
      pendingPods: this.pendingReplicas(),
      ...(this.absent ? { workloadMissing: this.absent.reason } : {}),
      lastError: this.lastError,
      ...(this.lastError !== undefined && this.backoffUntil > 0 ? { retryAt: this.backoffUntil } : {}),
      lastWakeMs: this.lastWakeLevel && this.lastWakeMs[this.lastWakeLevel],
      lastStartMs: this.lastStartMs,
      learning: this.learningSnapshot(),
      now: this.deps.clock.now(),
    };
  }

  /**
   * What this model learned, to keep across a restart (local state file, Model status): taken at
   * most every 10 minutes, so a status write does not follow every request.
   */
  learningSnapshot(fresh = false): ReturnType<ModelLearner["snapshot"]> {
    const now = this.deps.clock.now();
    if (fresh || !this.snapshotCache || now - this.snapshotCache.at >= 10 * 60_000)
      this.snapshotCache = { at: now, value: this.learner.snapshot(now) };
    return this.snapshotCache.value;
  }

  /** Takes up what an earlier run learned (its snapshot); logs why when it cannot be used. */
  restoreLearning(raw: unknown, source: string): void {
    if (raw === undefined) return;
    const result = this.learner.restore(raw, this.deps.clock.now());
    if (result.ok) this.log.info("learning history restored", { from: source });
    else
      this.log.warn("learning history not usable; starting with none", {
        from: source,
        reason: result.reason,
      });
  }

  state(): ModelState {
    const load = this.load();
    const { tier, record } = mostAwake(this.records.values(), this.pendingReplicas());
    return {
      id: this.id,
      key: this.key,
      tier,
      since: record?.since ?? this.coldSince,
      replica: record?.replica.id,
      address: record?.replica.address,
      replicas: [...this.records.values()].map((r) => ({
        id: r.replica.id,
        address: r.replica.address,
        tier: r.tier,
        since: r.since,
        busy: r.busy,
      })),
      inFlight: load.inFlight,
      held: load.held,
      lastStartMs: this.lastStartMs,
      lastWakeMs: this.lastWakeLevel && this.lastWakeMs[this.lastWakeLevel],
      lastError: this.lastError,
      leading: this.leading,
      workloadReplicas: this.workloadReplicas(),
      counts: this.counts,
      learning: this.learner.state(this.deps.clock.now(), this.config, this.deps.slot !== undefined),
    };
  }

  /**
   * The next tier change the ladder plans on its own for the most awake replica, by its clock: an
   * idle ready replica sleeps (or stops) at `sleepAfter`, a level-1 sleeper sleeps deeper, a sleeper
   * stops at `zeroAfter`. `at` is now when it is due at the next look; undefined while an operation
   * runs, while work keeps the replica as it is, or when only a request would change it. A prewarm
   * that keeps an idle ready replica awake gives the change at its end.
   */
  nextChange(): { tier: Tier; at: number } | undefined {
    const record = mostAwake(this.records.values(), this.pendingReplicas()).record;
    if (!record || record.busy || !this.leading) return undefined;
    const now = this.deps.clock.now();
    const load = this.load(now);
    this.decidedIdle = load.inFlight === 0 && load.held === 0;
    const parkedAs = load.held === 0 ? this.parked : undefined;
    // The ladder as the passes run it: a prewarm hold's sleeper neither deepens nor stops.
    const { settings } = passLadder(this, now, parkedAs);
    // A prewarm keeps an idle ready replica as it is until it ends; the change is the ladder's
    // then (a guessed prewarm's at once), not none (found by a docs walk: `snooze status` said
    // "-" for a hint's 2 minutes, and the model slept at their end).
    const end =
      this.decidedIdle && record.tier === "ready" && !this.prewarmWake ? this.learner.prewarmEnd : undefined;
    const at = end ? Math.max(now, end.until) : now;
    const floor =
      record.tier === "ready"
        ? end?.guessed
          ? end.until - settings.sleepAfter
          : this.learner.readyFloor(settings.sleepAfter)
        : undefined;
    const action = decideTier(
      {
        tier: record.tier,
        since: floor !== undefined ? Math.min(record.since, floor) : record.since,
        asleepSince: record.asleepSince,
        inFlight: load.inFlight,
        held: load.held + (!end && (this.learner.prewarming || this.prewarmWake) ? 1 : 0),
        lastActive: floor !== undefined ? Math.min(this.lastActive, floor) : this.lastActive,
        now: at,
        backoffUntil: this.backoffUntil,
      },
      settings,
    );
    return plannedChange(action, record, settings, this.deps.slot !== undefined, at);
  }

  /** Level-1 sleepers, for the host-memory budget of their machine. */
  levelOneSleepers(): { replica: string; node: string; bytes: number; since: number }[] {
    return [...this.records.values()]
      .filter((r) => r.tier === "asleep-1")
      .map((r) => ({
        replica: r.replica.id,
        node: r.replica.node,
        bytes: this.config.hostMemory,
        since: r.since,
      }));
  }

  /**
   * The engine's settings changed (a reload's new command, env or port): what failed before says
   * nothing of the new engine, so the back-off after it ends, and a start wanted meanwhile begins
   * now.
   */
  engineChanged(): void {
    const now = this.deps.clock.now();
    if (this.failures === 0 && this.backoffUntil <= now && this.crashes.length === 0) return;
    this.failures = 0;
    this.crashes = [];
    this.lastError = undefined;
    this.endBackoff(now);
    this.changed();
  }

  /**
   * The back-off after failures is over now, whatever was left of it. The activators hear it (the
   * model's tier again, without the failure), so they stop showing it and hold requests again.
   */
  private endBackoff(now: number): void {
    this.backoffUntil = now;
    if (this.leading) this.announce(undefined, now);
    // On Kubernetes the activators read it from the Model's status (its retryAt moves to now).
    this.deps.statusChanged?.();
  }

  /**
   * Tells watchers, again, which activation this model's held requests wait on (a swap), or that
   * the back-off after its failures ended at `backoffEnded`.
   */
  announce(
    traceContext: { traceparent?: string; tracestate?: string } | undefined,
    backoffEnded?: number,
  ): void {
    const record = mostAwake(this.records.values(), this.pendingReplicas()).record;
    this.deps.emit({
      model: this.id,
      replica: record?.replica.id ?? `${this.key}/activation`,
      address: record?.replica.address,
      tier: record?.tier ?? "cold",
      // Told again, not changed: a cold model stays cold since its last replica left (found by a
      // probe: `since: now` showed a swap's target cold for as long as the swap had run).
      since: record?.since ?? this.coldSince,
      ...traceContext,
      ...(backoffEnded !== undefined ? { retryAt: backoffEnded } : {}),
    });
  }

  // --- the platform's news ---

  /** The platform saw a change to this model's replicas. */
  platformChanged(departure?: Departure): void {
    if (departure) this.departures.set(departure.replica, departure.reason);
    this.changed();
  }

  // --- admin actions: the operations the ladder takes, on a person's request ---

  /**
   * Wakes (or starts) a replica as if a request were held; resolves once one is ready or it failed.
   * `caller`: the trace of whoever asked (an incoming event's), which the activation continues as it
   * does a held request's.
   */
  async wakeNow(timeoutMs = this.config.startTimeout, caller?: Context): Promise<void> {
    // Kept for the activation this wake causes (none when a replica is ready already).
    if (caller && trace.getSpan(caller) && this.tier !== "ready") this.callerContext = caller;
    // A person's wake ends their sleep or stop; a slot's grant (below) does not.
    this.parked = undefined;
    this.wantAwake();
    await this.waiters.settle(() => !this.wakeWanted, timeoutMs);
  }

  /**
   * An explicit prewarm (the `dev.snooze.model.prewarm` event): wakes (or starts) a replica at
   * prewarm priority (in a slot it never evicts a busy resident and yields to any request) and
   * keeps the model awake for `forMs` from when it is ready, or for what is left of today's
   * `prewarmBudget` if that is less; after that it follows `sleepAfter` from the moment it became ready, as after an
   * admin wake. Resolves once a replica is ready (or the wake failed, or `timeoutMs` passed) with
   * how long it is kept awake (0: no budget left, only the wake; for a `hint`, nothing at all). A
   * `hint` resolves at once: its wake is wanted only while its prewarm runs.
   */
  async prewarm(
    forMs: number,
    timeoutMs = this.config.startTimeout,
    options: { hint?: boolean; caller?: Context } = {},
  ): Promise<{ keptMs: number }> {
    const now = this.deps.clock.now();
    // A hint (a client listing models) is only a guess: it does not undo a person's sleep or stop.
    if (options.hint && this.parked !== undefined) return { keptMs: 0 };
    const kind = options.hint ? "hint" : "explicit";
    const tier = this.tier;
    const keptMs = this.learner.explicit(
      now,
      forMs,
      this.config.prewarmBudget,
      { resident: isResident(tier), ready: tier === "ready" },
      kind,
      options.caller,
    );
    // A hint acts only within the budget: with none left it does nothing.
    if (options.hint && keptMs === 0) return { keptMs };
    // With no budget left it is a plain wake: its activation continues the caller's trace.
    if (options.caller && trace.getSpan(options.caller) && this.tier !== "ready")
      this.callerContext = options.caller;
    this.parked = undefined;
    // A hint's wake is its prewarm's: wanted within its 2 minutes (counted from a start or wake
    // under way), over when they end unused. Wanted until a replica is ready, as an event's is, it
    // outlived them behind a slot's busy resident (found by a probe: 18 minutes later the idle
    // resident was put to sleep, and the hinted model started only to sleep again at once).
    if (this.tier !== "ready" && !options.hint) this.prewarmWake = true;
    this.changed();
    this.deps.slot?.changed();
    if (this.prewarmWake) await this.waiters.settle(() => !this.prewarmWake, timeoutMs);
    return { keptMs };
  }

  /**
   * Wanted awake as if a request were held, until a replica is ready or the activation failed: an
   * admin wake, or a slot's grant (a swap once begun finishes even if its requests went away). A
   * grant for a prewarm does not count as activity: the model's idle clock stays where it was.
   * A person's sleep or stop stands: whatever asked for the slot since (a request held anew, a
   * wake, a prewarm) ended it already; the requests held before it are served, then it parks.
   */
  wantAwake(options?: { prewarm?: boolean }): void {
    if (!this.wakeWanted) this.wakeWantedSince = this.deps.clock.now();
    this.wakeWanted = true;
    if (!options?.prewarm) this.lastActive = this.deps.clock.now();
    this.changed();
  }

  /**
   * Drains and sleeps every awake replica (stops them without sleep mode) until the next request.
   * Requests held when it is asked are served first (an activation under way finishes for them).
   * Resolves `done` once nothing is awake; `taken-back` as soon as a request held since (or a
   * wake) takes the model back; `timed-out` if it did not come within `timeoutMs`;
   * `stopped-instead` when nothing is awake but an engine's sleep failed and it was stopped.
   */
  sleepNow(
    level: 1 | 2 = this.config.sleepLevel,
    timeoutMs = parkTimeoutMs(this.config),
  ): Promise<ParkOutcome> {
    this.cancelWake();
    this.parked = this.config.sleep ? level : "stop";
    this.changed();
    return park(this, "sleep", () => quiet(this), timeoutMs);
  }

  /** Why the last sleep that failed did (its engine was stopped instead), if one did. */
  sleepFailed(): string | undefined {
    return this.sleepFailure?.reason;
  }

  /**
   * Stops every replica until the next request, as `sleepNow` puts them to sleep. A start that no
   * request waits for is stopped where it is, not finished first.
   */
  stopNow(timeoutMs = parkTimeoutMs(this.config)): Promise<ParkOutcome> {
    this.cancelWake();
    this.parked = "stop";
    this.changed();
    return park(this, "stop", () => this.records.size === 0 && this.pendingReplicas() === 0, timeoutMs);
  }

  /**
   * A person's sleep or stop ends a wake that no request waits for, and a back-off after failures:
   * the person took the model in hand, so the next request or wake tries at once (and a failure
   * then backs off longer, as before). A `snooze wake` that waited for the back-off hears from its
   * end that its wake will not come.
   */
  private cancelWake(): void {
    this.wakeWanted = false;
    this.prewarmWake = false;
    const now = this.deps.clock.now();
    if (this.backoffUntil > now) this.endBackoff(now);
  }

  /** Resolves once the model has no replica left, nothing starting (or `timeoutMs` passed, or it closed). */
  async untilGone(timeoutMs: number): Promise<void> {
    await this.waiters.settle(() => this.records.size === 0 && this.pendingReplicas() === 0, timeoutMs);
  }

  /** Self-heal: re-check the ready replicas' engines (alive, awake); free what is gone. */
  private recheckReady(): void {
    for (const record of this.records.values())
      if (record.tier === "ready" && !record.busy)
        this.operate(record, "recheck", () => recheck(this, record, selfHealCheckMs));
  }

  /** Demote a level-1 sleeper to level 2 because its machine's host-memory budget ran out. */
  demote(replica: string): void {
    const record = this.records.get(replica);
    if (record?.tier !== "asleep-1") return;
    if (record.busy) record.demote = true;
    else this.operate(record, "deepen", () => deepen(this, record));
  }

  // --- the decision ---

  /** Something changed (replicas, load, settings, a finished operation): look again this turn. */
  changed(): void {
    this.passed = false;
    if (!this.leading || this.closed) return;
    this.waiters.wake();
    if (this.deps.slot) {
      this.deps.slot.changed();
      return;
    }
    if (this.pendingPass) return;
    this.pendingPass = true;
    // A pass is nobody's request: it runs outside whatever trace queued it (a timer armed during a
    // request would otherwise carry that request's context into every later pass and its logs).
    queueMicrotask(() =>
      context.with(ROOT_CONTEXT, () => {
        this.pendingPass = false;
        this.pass();
      }),
    );
  }

  /** One decision pass (a slot member's pass is started by its slot, with `cap` set). */
  pass(): void {
    this.passed = false;
    if (!this.leading || this.closed || !this.deps.holding()) return;
    this.timer?.cancel();
    syncRecords(this);
    for (const record of this.records.values())
      if (record.interrupted && !record.busy) {
        record.interrupted = false;
        this.operate(record, "recheck", () => recheck(this, record));
      }
    // A wake asked for while a replica is ready already is done: it must not count as held forever.
    if (this.wakeWanted && [...this.records.values()].some((r) => r.tier === "ready")) {
      this.wakeWanted = false;
      this.waiters.wake();
    }
    const set = this.deps.platform.replicaSet(this.key);
    if (!set) {
      this.workloadMissing();
      this.deps.statusChanged?.();
      return;
    }
    if (this.absent) this.workloadFound();
    releaseSpared(this, set);
    replaceOutdated(this, set.scalable);
    const now = this.deps.clock.now();
    this.askBudgetAgain(now);
    const load = this.load(now);
    this.decidedIdle = load.inFlight === 0 && load.held === 0;
    this.burst = burstInFlight(this.burst, load);
    const parkedAs = load.held === 0 ? this.parked : undefined;
    const parked = parkedAs !== undefined;
    const prewarm = prewarmStep(this, now, load, parked, tierSettings(this, parkedAs));
    // A sleeper a request is likely to want soon stays asleep instead of being stopped or deepened.
    const { settings, hold } = passLadder(this, now, parkedAs);
    const keepFailedStarts = set.scalable && set.keepFailedStarts === true;
    // How long such a pod is kept: as decideReplicas keeps it, so the failure it decides removes it.
    const keepFor = keepFailedStarts ? keptFor(settings.startTimeout, set.progressDeadline) : undefined;
    // A replica a learned prewarm kept or woke, and that no request used, sleeps when it ended.
    const floor = this.learner.readyFloor(settings.sleepAfter);
    const plan = decideReplicas({
      replicas: [...this.records.values()].map((r) => ({
        pod: r.replica.id,
        tier: r.tier,
        since: floor !== undefined && r.tier === "ready" ? Math.min(r.since, floor) : r.since,
        asleepSince: r.asleepSince,
        podReady: r.replica.up,
        busy: r.busy || now < r.coolUntil,
        load: 0,
        ...(r.replica.failing !== undefined ? { failing: r.replica.failing } : {}),
        ...(r.replica.crashed ? { crashed: true } : {}),
        ...(r.startFailed ? { startFailed: true } : {}),
      })),
      pendingPods: this.pendingReplicas(),
      workloadReplicas: this.workloadReplicas(),
      desired: this.target.desired,
      parked,
      minReplicas: this.target.minReplicas,
      minPods: this.target.minPods ?? 0,
      maxReplicas: this.target.maxReplicas,
      concurrency: this.config.concurrency,
      inFlight: load.inFlight,
      held: load.held + prewarm.held,
      ...(load.pinnedTo ? { pinnedTo: load.pinnedTo } : {}),
      burst: this.burst,
      // No request since a prewarm ended unused: neither its wake nor its start is activity.
      lastActive: floor !== undefined ? Math.min(this.lastActive, floor) : this.lastActive,
      now,
      backoffUntil: this.backoffUntil,
      cap: this.deps.slot ? this.cap : undefined,
      ...(this.deps.slot ? { inSlot: true } : {}),
      ...(keepFailedStarts ? { keepFailedStarts } : {}),
      ...(keepFailedStarts && set.progressDeadline !== undefined
        ? { progressDeadline: set.progressDeadline }
        : {}),
      settings,
    });
    // Under a person's stop a start no request waits for is not finished but stopped (below).
    for (const action of plan.actions)
      if (parkedAs !== "stop" || action.kind !== "finish-start") act(this, action, set.scalable, keepFor);
    if (parkedAs === "stop") stopUnwanted(this, set.scalable);
    else if (parkedAs !== undefined) sleepUnwanted(this, parkedAs);
    let next = Math.min(plan.nextAt, prewarm.nextAt, hold.nextAt);
    for (const r of this.records.values()) if (r.coolUntil > now) next = Math.min(next, r.coolUntil);
    next = Math.min(next, this.loads.nextExpiry());
    if (Number.isFinite(next))
      this.timer = this.deps.clock.setTimeout(() => this.changed(), Math.max(1, next - now));
    this.passed = true;
    this.deps.statusChanged?.();
  }

  /**
   * No replica set. When the platform says the workload is missing, the status says so, and a
   * request held (or a person's wake) past a short grace fails its start with that reason, so it is
   * answered at once, not at the end of its hold budget (found by a probe: a Model naming a
   * Deployment that does not exist held every request for its 5 minutes, its status "no replicas").
   */
  private workloadMissing(): void {
    const reason = this.deps.platform.missingWorkload?.(this.key);
    if (reason === undefined) return;
    const now = this.deps.clock.now();
    this.absent = { ...this.absent, since: this.absent?.since ?? now, reason };
    if (this.load(now).held === 0) return;
    const graceFrom = Math.max(this.absent.since, this.absent.failedAt ?? this.absent.since);
    const due = Math.max(graceFrom + missingWorkloadGraceMs, this.backoffUntil);
    if (now < due) {
      this.timer = this.deps.clock.setTimeout(() => this.changed(), due - now);
      return;
    }
    this.absent.failedAt = now;
    startNotBegun(this, new StartFailed(`${this.id}/workload`, reason), undefined);
    // A person's wake waits for its end: this is it.
    this.waiters.wake();
  }

  /** The workload is there (again): failures its absence caused no longer hold starts back. */
  private workloadFound(): void {
    const failed = this.absent?.failedAt !== undefined;
    this.absent = undefined;
    if (failed) this.engineChanged();
  }

  /**
   * A deeper sleep that could not be asked is asked again after its cool-down: the ladder's by the
   * decision below, a demotion by the host-memory budget, asked here first (it demotes whom it
   * still finds over the budget, and a replica it demotes is busy before the decision).
   */
  private askBudgetAgain(now: number): void {
    let again = false;
    for (const record of this.records.values())
      if (record.budgetAgain && now >= record.coolUntil) {
        record.budgetAgain = false;
        again ||= record.tier === "asleep-1" && !record.busy;
      }
    if (again) this.deps.levelOneChanged?.();
  }

  /** Replicas awake and asleep from now on, for the model's GPU-seconds (counted by its leader only). */
  accountTiers(): void {
    if (!this.leading) {
      this.learner.gpu.pause(this.deps.clock.now());
      return;
    }
    let awake = 0;
    let asleep = 0;
    for (const r of this.records.values()) {
      if (isResident(r.tier)) awake++;
      else if (isAsleep(r.tier)) asleep++;
    }
    this.learner.gpu.set(this.deps.clock.now(), awake, asleep);
  }

  /** Brings the GPU-seconds up to now (a scrape). */
  accrue(): void {
    this.learner.gpu.accrue(this.deps.clock.now());
  }

  /** A person's sleep with no request held: the level it asked for; undefined otherwise. */
  sleepWanted(): 1 | 2 | undefined {
    const parked = this.parked;
    return parked !== undefined && parked !== "stop" && this.load().held === 0 ? parked : undefined;
  }

  // --- replicas and their records ---

  pendingReplicas(): number {
    const live = this.deps.platform.replicaSet(this.key)?.replicas.length ?? 0;
    return Math.max(0, this.workloadReplicas() - live);
  }

  workloadReplicas(): number {
    const fromPlatform = this.deps.platform.replicaSet(this.key)?.scale ?? 0;
    const override = this.scaleOverride;
    if (
      override &&
      (this.deps.clock.now() < override.until || this.scaling) &&
      override.replicas !== fromPlatform
    )
      return override.replicas;
    this.scaleOverride = undefined;
    return fromPlatform;
  }

  /**
   * A replica failed on its own (it exited, or stopped answering and is replaced): counted within
   * `crashWindowMs`, and the restarts back off. From the second the model's lastError says so.
   * Returns the back-off.
   */
  leftOnItsOwn(reason: string): number {
    const now = this.deps.clock.now();
    this.crashes = withCrash(this.crashes, now);
    const backoff = backoffMs(this.failures, this.crashes, now);
    this.backoffUntil = now + backoff;
    if (backoff > 0) this.lastError = crashLoopError(reason, this.crashes.length, backoff);
    return backoff;
  }

  // --- what the operations and the modules it delegates to ask of it (ReplicaOps and the like) ---

  /**
   * Runs `operation` on `record` on its own lifetime: the record is busy until it ends; a failure
   * cools the replica down, a lost lead marks it for a re-check, and the end looks again.
   */
  operate(record: ReplicaRecord, what: string, operation: () => Promise<void>): void {
    record.busy = true;
    const leadership = this.leadership;
    void operation()
      .catch((error: unknown) => {
        if (leadership !== this.leadership) return;
        if (error instanceof NotLeading) {
          record.interrupted = true;
          return;
        }
        this.log.warn("operation failed", { replica: record.replica.id, operation: what, error });
        record.coolUntil = this.deps.clock.now() + failedOperationCoolMs;
      })
      .finally(() => {
        record.busy = false;
        if (leadership !== this.leadership) return;
        if (record.demote) {
          record.demote = false;
          if (record.tier === "asleep-1" && this.present(record)) {
            this.operate(record, "deepen", () => deepen(this, record));
            return;
          }
        }
        this.changed();
      });
  }

  guard(leadership: number): void {
    if (leadership !== this.leadership || !this.leading || !this.deps.holding()) throw new NotLeading();
  }

  present(record: ReplicaRecord): boolean {
    return this.records.get(record.replica.id) === record;
  }

  /** Sets a replica's tier now (the slot and the next pass see it at once) and records it on the platform. */
  setTier(
    record: ReplicaRecord,
    tier: Tier,
    news: { estimateMs?: number; error?: string; since?: number } = {},
  ): Promise<void> {
    const leadership = this.leadership;
    this.guard(leadership);
    const from = record.tier;
    const now = this.deps.clock.now();
    if (isAsleep(tier) && !isAsleep(from)) record.asleepSince = now;
    record.tier = tier;
    record.since = news.since ?? now;
    this.accountTiers();
    if (from !== tier) this.deps.metrics.transition(this.id, from, tier);
    // Every tier change at info: `snooze serve`'s log says what each model did and when.
    if (from !== tier) this.log.info("tier", { replica: record.replica.id, from, to: tier });
    const event = replicaEvent(this.id, this.backoffUntil, record, news.estimateMs, news.error);
    this.deps.emit(event);
    if ((from === "asleep-1") !== (tier === "asleep-1")) this.deps.levelOneChanged?.();
    record.unwritten = event;
    const write = writeTier(this, record, event, leadership, 1);
    this.deps.statusChanged?.();
    this.deps.slot?.changed();
    return write;
  }

  emitFor(record: ReplicaRecord, estimateMs?: number, error?: string, exit?: string): void {
    this.deps.emit(replicaEvent(this.id, this.backoffUntil, record, estimateMs, error, exit));
  }

  estimate(kind: "start" | "wake", level: 1 | 2 = 1): number | undefined {
    return kind === "start" ? this.lastStartMs : (this.lastWakeMs[level] ?? this.lastWakeMs[1]);
  }

  /** A new activation, traced under a swap, a prewarm or the held request that caused it (`startActivation`). */
  beginActivation(kind: "start" | "wake", from: Tier, started = this.deps.clock.now()): Activation {
    // A swap's, a prewarm's or the held request's trace, in that order; else a trace of its own.
    const parent = this.parent ?? this.learner.prewarmContext ?? this.callerContext ?? ROOT_CONTEXT;
    this.callerContext = undefined;
    return startActivation(this.id, kind, from, started, parent);
  }

  /** Scales down by one, removing this replica. */
  stopReplica(record: ReplicaRecord): Promise<void> {
    return removeReplicas(this, [record], Math.max(0, this.workloadReplicas() - 1));
  }

  /** An activation failed: held requests hear why (the event carries the reason), and back-off grows. */
  activationFailed(record: ReplicaRecord, reason: string, backTo?: Tier): void {
    this.failures++;
    this.lastError = reason;
    this.wakeWanted = false;
    this.prewarmWake = false;
    const now = this.deps.clock.now();
    this.backoffUntil = now + backoffMs(this.failures, this.crashes, now);
    inActivation(record, () => this.log.warn("activation failed", { reason, failures: this.failures }));
    record.activation?.span.recordException(new Error(reason));
    endActivation(this, record, "failed", reason);
    if (backTo && this.present(record)) void this.setTier(record, backTo, { error: reason }).catch(() => {});
    else this.emitFor(record, undefined, reason);
    this.deps.statusChanged?.();
  }

  succeeded(record: ReplicaRecord): void {
    this.failures = 0;
    this.lastError = undefined;
    this.backoffUntil = 0;
    this.wakeWanted = false;
    this.prewarmWake = false;
    // A guessed prewarm's wake (learned, staged, a hint) is not activity: unused, it sleeps when the prewarm ends.
    if (!this.learner.guessedPrewarmOnly) this.lastActive = this.deps.clock.now();
    endActivation(this, record, "ready");
    this.log.info("engine ready", { replica: record.replica.id });
  }
}
