import { type Context, context, trace } from "@opentelemetry/api";
import type { Clock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";
import { isAsleep, type ReplicaEvent, type Tier } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { inSpan, traceparentOf, tracer } from "../lib/tracing.ts";
import { EngineClient } from "./engine-client.ts";
import { decideTier, type LadderAction } from "./ladder.ts";
import type { AutoscalerMetrics } from "./metrics.ts";
import type { Platform, ReplicaHandle } from "./platform.ts";
import type { SlotMember } from "./slot-arbiter.ts";

export interface ModelControllerDeps {
  platform: Platform;
  clock: Clock;
  log: Logger;
  metrics: AutoscalerMetrics;
  emit(event: ReplicaEvent): void;
  /** A replica fell asleep at level 1 or left it: the host-memory budget is re-checked. */
  onLevelOneChanged(): void;
  /** Set for a slot member: the slot, not the ladder, decides when it activates; told of every change. */
  slot?: { changed(): void };
}

/** What the admin API and `snooze status` show for a model. */
export interface ModelState {
  id: string;
  tier: Tier;
  since: number;
  replica?: string;
  address?: string;
  inFlight: number;
  held: number;
  lastStartMs?: number;
  lastWakeMs?: number;
  lastError?: string;
}

const maxBackoff = 60_000;
const crashWindow = 5 * 60_000;
const drainPoll = 25;

/**
 * Drives one model's replica along the tier ladder (local mode runs one
 * replica per model). Decisions come from the pure `decideTier`; this class
 * only acts on them, one operation at a time, on its own lifetime: no client
 * connection can abort a start or a wake.
 */
export class ModelController {
  readonly config: ModelConfig;
  private readonly deps: ModelControllerDeps;
  private tier: Tier = "cold";
  private since: number;
  private asleepSince = 0;
  private replica?: ReplicaHandle;
  private inFlight = 0;
  private held = 0;
  private lastActive = 0;
  /** Operations asked for and not finished; they run one after another, in order. */
  private pending = 0;
  private operations: Promise<void> = Promise.resolve();
  private closed = false;
  private timer?: { cancel(): void };
  private activationFailures = 0;
  private crashes: number[] = [];
  private backoffUntil = 0;
  private suspect = false;
  private lastStartMs?: number;
  private lastWakeMs: { 1?: number; 2?: number } = {};
  private lastError?: string;
  private readonly idleWaiters = new Set<() => void>();
  /** When the oldest request now held arrived. */
  private heldSince?: number;
  /** Draining to hand the slot over: demand for this model does not take the replica back. */
  private yielding = false;
  /** The drain is over and the sleep or stop has begun: demand can no longer take the replica back. */
  private releasing = false;
  /** Phases of the last drain-then-sleep, for the slot's swap metrics. */
  lastRelease = { drainMs: 0, sleepMs: 0 };

  constructor(config: ModelConfig, deps: ModelControllerDeps) {
    this.config = config;
    this.deps = deps;
    this.since = deps.clock.now();
  }

  get currentTier(): Tier {
    return this.tier;
  }

  /** A request is held: act at once. A hint names a replica the activator could not reach. */
  demand(unreachable?: string): void {
    if (unreachable && unreachable === this.replica?.id) this.suspect = true;
    this.setHeld(Math.max(this.held, 1));
    this.lastActive = this.deps.clock.now();
    this.reconcile();
  }

  /** `oldestHeldMs`: how long the oldest held request has waited, when the activator knows it. */
  stats(inFlight: number, held: number, oldestHeldMs?: number): void {
    this.inFlight = inFlight;
    this.setHeld(held, oldestHeldMs);
    if (inFlight > 0 || held > 0) this.lastActive = this.deps.clock.now();
    if (inFlight === 0) for (const wake of this.idleWaiters) wake();
    this.reconcile();
  }

  private setHeld(held: number, oldestHeldMs?: number): void {
    // The slot arbiter compares when each member's oldest held request arrived. A queue that never
    // empties keeps moving its oldest entry forward, so the activator's age wins over our own guess.
    if (held === 0) this.heldSince = undefined;
    else if (oldestHeldMs !== undefined) this.heldSince = this.deps.clock.now() - oldestHeldMs;
    else if (this.held === 0) this.heldSince = this.deps.clock.now();
    this.held = held;
  }

  /** This member as its slot's arbiter sees it. */
  slotView(): SlotMember {
    return {
      model: this.config.id,
      priority: this.config.priority,
      tier: this.tier,
      inFlight: this.inFlight,
      held: this.held,
      heldSince: this.heldSince,
      backoffUntil: this.backoffUntil,
    };
  }

  /** The slot granted this member the accelerator: start or wake now (after any running operation). */
  async activateForSlot(parent?: Context): Promise<void> {
    await this.exclusive(async () => {
      if (this.tier === "cold" || isAsleep(this.tier))
        await this.activate(this.tier === "cold" ? "start" : "wake", parent);
    });
  }

  /** The slot goes to another member: stop taking requests, drain within `drainTimeout`, then sleep (or stop). */
  async yieldSlot(drainTimeout: number, parent?: Context): Promise<void> {
    await this.exclusive(async () => {
      if (this.tier !== "ready") return;
      this.yielding = true;
      try {
        await this.drainThen(this.config.sleep ? this.config.sleepLevel : "stop", drainTimeout, parent);
      } finally {
        this.yielding = false;
      }
    });
  }

  /** Tells watchers, again, which activation this model's held requests wait on. */
  announce(traceparent: string | undefined): void {
    this.deps.emit({ ...this.event(), traceparent });
  }

  /** Self-heal: re-check the engine of a resident (alive, awake) and free the slot if it is gone. */
  async recheckResident(): Promise<void> {
    if (this.tier === "ready") await this.exclusive(() => this.recheck());
  }

  /** The event describing the current state, for new watchers. */
  event(): ReplicaEvent {
    return {
      model: this.config.id,
      replica: this.replica?.id ?? `${this.config.id}-0`,
      address: this.replica?.address,
      tier: this.tier,
      since: this.since,
    };
  }

  state(): ModelState {
    return {
      id: this.config.id,
      tier: this.tier,
      since: this.since,
      replica: this.replica?.id,
      address: this.replica?.address,
      inFlight: this.inFlight,
      held: this.held,
      lastStartMs: this.lastStartMs,
      lastWakeMs: this.lastWakeMs[1] ?? this.lastWakeMs[2],
      lastError: this.lastError,
    };
  }

  /** Level-1 sleepers, for the host-memory budget. */
  levelOneSleeper() {
    return this.tier === "asleep-1"
      ? { model: this.config.id, bytes: this.config.hostMemory, since: this.since }
      : undefined;
  }

  /** The platform saw the engine exit on its own. */
  replicaExited(replica: ReplicaHandle, reason: string): void {
    if (replica.id !== this.replica?.id) return;
    const now = this.deps.clock.now();
    this.crashes = [...this.crashes.filter((t) => now - t < crashWindow), now];
    this.backoffUntil = now + this.backoff();
    this.replica = undefined;
    // A start or wake in progress notices the exit itself and reports it.
    if (this.tier !== "starting" && this.tier !== "waking") this.setTier("cold", reason);
    this.reconcile();
  }

  // Admin actions: the same operations the ladder takes, on a person's request.
  async wakeNow(): Promise<void> {
    this.demand();
  }

  async sleepNow(level: 1 | 2 = this.config.sleepLevel): Promise<void> {
    await this.exclusive(() =>
      this.tier === "ready" ? this.drainThen(this.config.sleep ? level : "stop") : Promise.resolve(),
    );
  }

  async stopNow(): Promise<void> {
    await this.exclusive(async () => {
      if (this.tier === "ready") await this.drainThen("stop");
      else if (this.replica) await this.stopReplica();
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    this.timer?.cancel();
  }

  /** Looks at the state and starts what the ladder says, unless an operation runs already. */
  reconcile(): void {
    if (this.closed) return;
    if (this.pending > 0) {
      // The one decision that may interrupt an operation: demand during a drain takes the replica back.
      if (this.tier === "draining" && this.held > 0 && !this.yielding && !this.releasing)
        this.setTier("ready");
      return;
    }
    this.timer?.cancel();
    if (this.suspect) {
      this.suspect = false;
      void this.exclusive(() => this.recheck());
      return;
    }
    const now = this.deps.clock.now();
    const action = decideTier(
      {
        tier: this.tier,
        since: this.since,
        asleepSince: this.asleepSince,
        inFlight: this.inFlight,
        held: this.held,
        lastActive: this.lastActive,
        now,
        backoffUntil: this.backoffUntil,
      },
      this.config,
    );
    this.act(action, now);
  }

  private act(action: LadderAction, now: number): void {
    if (this.deps.slot && (action.kind === "start" || action.kind === "wake")) {
      // A slot member activates only when its slot grants it the accelerator.
      this.deps.slot.changed();
      return;
    }
    switch (action.kind) {
      case "wait":
        if (Number.isFinite(action.at))
          this.timer = this.deps.clock.setTimeout(() => this.reconcile(), action.at - now);
        return;
      case "start":
        void this.exclusive(() => this.activate("start"));
        return;
      case "wake":
        void this.exclusive(() => this.activate("wake"));
        return;
      case "undrain":
        this.setTier("ready");
        return;
      case "drain-and-sleep":
        void this.exclusive(() => this.drainThen(action.level));
        return;
      case "drain-and-stop":
        void this.exclusive(() => this.drainThen("stop"));
        return;
      case "deepen":
        void this.exclusive(() => this.deepen());
        return;
      case "stop":
        void this.exclusive(() => this.stopReplica());
        return;
    }
  }

  /** Runs one operation at a time; afterwards the ladder looks again. */
  private exclusive(operation: () => Promise<void>): Promise<void> {
    // Busy from the moment it is asked for, so the ladder does not ask for it twice.
    this.pending++;
    const run = this.operations.then(async () => {
      try {
        await operation();
      } catch (error) {
        this.deps.log.error("operation failed", { model: this.config.id, error });
      } finally {
        this.pending--;
      }
    });
    this.operations = run;
    return run.then(() => this.reconcile());
  }

  /** Start from cold or wake from sleep, then warm up; on failure tell the activator why. */
  private async activate(kind: "start" | "wake", parentContext: Context = context.active()): Promise<void> {
    const from = this.tier;
    const level: 1 | 2 = from === "asleep-2" ? 2 : 1;
    const started = this.deps.clock.now();
    const estimate = kind === "start" ? this.lastStartMs : (this.lastWakeMs[level] ?? this.lastWakeMs[1]);
    const log = this.deps.log.child({ model: this.config.id });
    const span = tracer.startSpan(
      "snooze.activation",
      {
        // Its own trace unless a swap started it: no client request owns an activation.
        root: trace.getSpan(parentContext) === undefined,
        attributes: { "snooze.model": this.config.id, "snooze.from_tier": from, "snooze.activation": kind },
      },
      parentContext,
    );
    const parent = trace.setSpan(parentContext, span);
    this.setTier(kind === "start" ? "starting" : "waking", undefined, estimate, traceparentOf(span));
    log.info(kind === "start" ? "starting engine" : "waking engine", { from, estimateMs: estimate });
    try {
      if (kind === "start") {
        const signal = AbortSignal.timeout(Math.min(this.config.startTimeout, 2 ** 31 - 1));
        this.replica = await inSpan(
          "snooze.start",
          {},
          () => this.deps.platform.start(this.config, signal),
          parent,
        ).catch((error: Error) => {
          throw new Error(
            signal.aborted
              ? `the engine did not become healthy within ${this.config.startTimeout}ms`
              : error.message,
          );
        });
      } else {
        const replica = this.replica!;
        await inSpan(
          "snooze.wake",
          { "snooze.sleep_level": level },
          () => this.deps.platform.wake(replica, level, this.config.wakeTimeout),
          parent,
        );
      }
      if (this.config.warmup) {
        const client = new EngineClient(this.replica!.address);
        await inSpan(
          "snooze.warmup",
          {},
          () => client.warmup(this.config.id, this.config.wakeTimeout),
          parent,
        );
      }
      if (!this.replica || !this.deps.platform.alive(this.replica))
        throw new Error("the engine exited during activation");
      const took = this.deps.clock.now() - started;
      if (kind === "start") this.lastStartMs = took;
      else this.lastWakeMs[level] = took;
      this.activationFailures = 0;
      this.lastError = undefined;
      this.deps.metrics.activation.observe({ model: this.config.id, from, outcome: "ready" }, took / 1000);
      this.lastActive = this.deps.clock.now();
      this.setTier("ready");
      log.info("engine ready", { from, tookMs: took });
    } catch (error) {
      const reason = `${kind === "start" ? "start" : "wake"} of ${this.config.id} failed: ${(error as Error).message}`;
      this.activationFailures++;
      this.backoffUntil = this.deps.clock.now() + this.backoff();
      this.deps.metrics.activation.observe(
        { model: this.config.id, from, outcome: "failed" },
        (this.deps.clock.now() - started) / 1000,
      );
      log.warn("activation failed", { reason, failures: this.activationFailures });
      span.recordException(error as Error);
      span.setStatus({ code: 2, message: reason });
      await this.afterFailedActivation(kind, level, reason);
    } finally {
      span.end();
    }
  }

  /**
   * A failed wake leaves the engine asleep if it says so; a second failure in a
   * row, or an engine that no longer answers, is stopped so the next try starts clean.
   */
  private async afterFailedActivation(kind: "start" | "wake", level: 1 | 2, reason: string): Promise<void> {
    if (
      kind === "wake" &&
      this.replica &&
      this.activationFailures < 2 &&
      this.deps.platform.alive(this.replica)
    ) {
      const sleeping = await new EngineClient(this.replica.address).isSleeping().catch(() => undefined);
      if (sleeping) {
        this.setTier(level === 2 ? "asleep-2" : "asleep-1", reason);
        return;
      }
    }
    if (this.replica) await this.deps.platform.stop(this.replica).catch(() => {});
    this.replica = undefined;
    this.setTier("cold", reason);
  }

  /** Stop routing, let in-flight requests finish (bounded), then sleep or stop. */
  private async drainThen(
    next: 1 | 2 | "stop",
    drainTimeout = this.config.drainTimeout,
    parent: Context = context.active(),
  ): Promise<void> {
    const replica = this.replica;
    if (!replica) return;
    this.setTier("draining");
    const drainSpan = tracer.startSpan(
      "snooze.drain",
      { attributes: { "snooze.model": this.config.id } },
      parent,
    );
    const deadline = this.deps.clock.now() + drainTimeout;
    while (this.tier === "draining" && this.inFlight > 0 && this.deps.clock.now() < deadline) {
      await new Promise<void>((resolve) => {
        const timer = this.deps.clock.setTimeout(resolve, drainPoll);
        this.idleWaiters.add(() => {
          timer.cancel();
          resolve();
        });
      });
      this.idleWaiters.clear();
    }
    drainSpan.setAttribute("snooze.drain.timed_out", this.inFlight > 0);
    drainSpan.end();
    const drained = this.deps.clock.now();
    this.lastRelease = { drainMs: drained - (deadline - drainTimeout), sleepMs: 0 };
    if (this.tier !== "draining") return; // demand came back (undrained), or the engine died
    // From here on the engine is going down; requests arriving now wait for the next wake.
    this.releasing = true;
    try {
      await this.release(replica, next, drainTimeout, drained, parent);
    } finally {
      this.releasing = false;
    }
  }

  private async release(
    replica: ReplicaHandle,
    next: 1 | 2 | "stop",
    drainTimeout: number,
    drained: number,
    parent: Context,
  ): Promise<void> {
    if (next === "stop") {
      await this.stopReplica();
      return;
    }
    try {
      await inSpan(
        "snooze.sleep",
        { "snooze.model": this.config.id, "snooze.sleep_level": next },
        () => this.deps.platform.sleep(replica, next, drainTimeout + 30_000),
        parent,
      );
      this.lastRelease.sleepMs = this.deps.clock.now() - drained;
      this.setTier(next === 1 ? "asleep-1" : "asleep-2");
    } catch (error) {
      // An engine in an unknown state would hang the next request: stop it instead.
      this.deps.log.warn("sleep failed; stopping the engine", { model: this.config.id, error });
      await this.stopReplica(`sleep failed: ${(error as Error).message}`);
    }
  }

  /**
   * Level 1 → level 2 frees host RAM. vLLM ignores a sleep while asleep (and
   * still reports discard_all), so the engine is woken (weights back from host
   * RAM, fast) and put to sleep again at level 2. A slot member's GPU may hold
   * another resident by now, so a slot member is stopped instead.
   */
  private async deepen(): Promise<void> {
    const replica = this.replica;
    if (!replica || this.tier !== "asleep-1") return;
    if (this.deps.slot) {
      await this.stopReplica();
      return;
    }
    try {
      await inSpan("snooze.deepen", { "snooze.model": this.config.id }, async () => {
        await this.deps.platform.wake(replica, 1, this.config.wakeTimeout);
        await this.deps.platform.sleep(replica, 2, 30_000);
      });
      this.setTier("asleep-2");
    } catch (error) {
      this.deps.log.warn("deepening sleep failed; stopping the engine", { model: this.config.id, error });
      await this.stopReplica();
    }
  }

  /** Re-check a replica the activator could not reach: alive and awake, or gone. */
  private async recheck(): Promise<void> {
    const replica = this.replica;
    if (!replica) return;
    const client = new EngineClient(replica.address);
    const ok =
      this.deps.platform.alive(replica) &&
      (await client.healthy()) &&
      !(this.config.sleep && (await client.isSleeping().catch(() => true)));
    if (ok) return;
    this.deps.log.warn("replica failed its re-check; restarting", {
      model: this.config.id,
      replica: replica.id,
    });
    await this.stopReplica("the engine did not answer");
  }

  private async stopReplica(reason?: string): Promise<void> {
    if (this.replica) await this.deps.platform.stop(this.replica);
    this.replica = undefined;
    this.setTier("cold", reason);
  }

  private backoff(): number {
    const failures = this.activationFailures + this.crashes.length;
    return failures <= 1 ? 0 : Math.min(maxBackoff, 1_000 * 2 ** (failures - 2));
  }

  private setTier(tier: Tier, error?: string, estimateMs?: number, traceparent?: string): void {
    const from = this.tier;
    const wasLevelOne = from === "asleep-1";
    this.tier = tier;
    this.since = this.deps.clock.now();
    if (error) this.lastError = error;
    if (from !== tier) this.deps.metrics.transition(this.config.id, from, tier);
    this.deps.log.debug("tier", { model: this.config.id, from, to: tier, error });
    this.deps.emit({ ...this.event(), estimateMs, error, traceparent });
    if (wasLevelOne !== (tier === "asleep-1")) this.deps.onLevelOneChanged();
    if (isAsleep(tier) && !isAsleep(from)) this.asleepSince = this.since;
    this.deps.slot?.changed();
  }

  /** Demote to level 2 because the host-memory budget ran out. */
  demote(): void {
    if (this.tier === "asleep-1") void this.exclusive(() => this.deepen());
  }
}
