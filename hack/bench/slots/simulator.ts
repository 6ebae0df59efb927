import { decideTier } from "../../../autoscaler/ladder.ts";
import { isResident, type SlotDecision } from "../../../autoscaler/slot-arbiter.ts";
import { isAsleep, type Tier } from "../../../lib/replica-event.ts";
import type { ResolvedTierSettings } from "../../../lib/settings/index.ts";
import { type EngineOperation, type EngineTimings, operationMs, serviceMs } from "./engine-timings.ts";
import { EventQueue, type Scheduled } from "./event-queue.ts";
import type { BenchSlotMember, PolicyUnderTest } from "./policy.ts";
import type { TraceRequest } from "./trace.ts";

/**
 * A discrete-event simulation of one slot in virtual time: the activator's
 * hold queues (arrival order, per-replica concurrency, hold budget → 503),
 * one engine per model with simulated timings, the tier ladder (the real
 * `decideTier`) and a slot executor that carries out a policy's decisions the
 * way `autoscaler/slot.ts` does: one grant or swap at a time; a swap drains
 * the incumbent (bounded by drainTimeout: what still runs then is cut, as the
 * activators end it), sleeps it, then
 * wakes the target and warms it up; held requests are released when it is
 * ready. Models outside the slot (the background model) run on their own GPU
 * under the ladder alone.
 *
 * Not modelled: the activator's 1 s stats tick (the control plane sees exact
 * counts at once), engine failures, batching slow-down, network time.
 */
export interface SimModel {
  id: string;
  priority: number;
  /** A slot member activates when the policy grants it the slot; other models when the ladder says so. */
  inSlot: boolean;
  initialTier: "cold" | "ready" | "asleep-1" | "asleep-2";
  engine: EngineTimings;
}

export type SimTierSettings = Pick<
  ResolvedTierSettings,
  | "sleep"
  | "sleepAfter"
  | "sleepLevel"
  | "deepSleepAfter"
  | "zeroAfter"
  | "holdBudget"
  | "queueDepth"
  | "concurrency"
  | "warmup"
  | "drainTimeout"
>;

export interface SimSlotSettings {
  minResidency: number;
  swapCooldown: number;
  drainTimeout: number;
  maxWait: number;
  preemptAfter: number;
}

export interface SimConfig {
  models: SimModel[];
  slot: SimSlotSettings;
  tier: SimTierSettings;
  /** Seeds the engines' timing jitter. */
  seed: number;
  /**
   * What a member's `heldSince` means. "held-nonzero" is what an early
   * ModelController reported: the moment its held count went from zero to
   * non-zero (a queue that never empties keeps an old value). "oldest-held" is
   * what the activators report today: the arrival of the oldest request now held.
   */
  heldSince?: "held-nonzero" | "oldest-held";
}

export interface RequestOutcome {
  id: number;
  model: string;
  arrived: number;
  /** When it left the hold queue for an engine; undefined when refused. */
  dispatched?: number;
  ended: number;
  /** Time held in the activator: until dispatch, or until refused. */
  holdMs: number;
  /** served; refused with 503 (hold budget or queue full); cut (its engine stopped under it). */
  result: "served" | "refused" | "cut";
}

/** One grant or swap, with the moments its phases ended. */
export interface SlotTransition {
  kind: "grant" | "swap";
  from?: string;
  to: string;
  reason: string;
  decidedAt: number;
  /** The incumbent's drain ended (in-flight done, or drainTimeout). */
  drainedAt?: number;
  /** The incumbent is asleep. */
  asleepAt?: number;
  /** The target is ready, warm-up done. */
  readyAt?: number;
  calledOff?: boolean;
}

export interface SimResult {
  policy: string;
  outcomes: RequestOutcome[];
  transitions: SlotTransition[];
  /** Completed swaps (grants to an empty slot are not swaps). */
  swaps: number;
  /** When the last request ended: the end of the measured window. */
  endMs: number;
  /** Time each model held its GPU (starting, waking, ready or draining), within the window. */
  residentMs: Record<string, number>;
  /** Broken invariants (more than one resident, a request ended twice or never). */
  violations: string[];
  events: number;
}

interface HeldRequest {
  request: TraceRequest;
  expiry: Scheduled;
}

interface Replica {
  model: SimModel;
  tier: Tier;
  since: number;
  asleepSince: number;
  held: HeldRequest[];
  heldSince?: number;
  inFlight: Map<number, { request: TraceRequest; dispatched: number; finish: Scheduled }>;
  lastActive: number;
  lastRequestAt?: number;
  /** An operation runs (ModelController's `exclusive`); others queue behind it. */
  busy: boolean;
  queued: (() => void)[];
  /** Draining to hand the slot over: demand does not take it back. */
  yielding: boolean;
  /** Inside the sleep call (after the drain). */
  sleeping: boolean;
  idleWaiter?: () => void;
  timer?: Scheduled;
  operations: Map<EngineOperation, number>;
  residentFrom?: number;
  residentMs: number;
}

const maxEvents = 5_000_000;
const maxSettleRounds = 1_000;

export function simulateSlot(
  requests: readonly TraceRequest[],
  config: SimConfig,
  policy: PolicyUnderTest,
): SimResult {
  return new Simulation(requests, config, policy).run();
}

class Simulation {
  private readonly queue = new EventQueue();
  private readonly replicas = new Map<string, Replica>();
  private readonly outcomes = new Map<number, RequestOutcome>();
  private readonly transitions: SlotTransition[] = [];
  private readonly violations: string[] = [];
  private now = 0;
  private dirty = true;
  private slotBusy = false;
  private slotTimer?: Scheduled;
  private residentSince = 0;
  private lastSwapAt = Number.NEGATIVE_INFINITY;
  private swaps = 0;
  private readonly requests: readonly TraceRequest[];
  private readonly config: SimConfig;
  private readonly policy: PolicyUnderTest;

  constructor(requests: readonly TraceRequest[], config: SimConfig, policy: PolicyUnderTest) {
    this.requests = requests;
    this.config = config;
    this.policy = policy;
    for (const model of config.models) {
      this.replicas.set(model.id, {
        model,
        tier: model.initialTier,
        since: 0,
        asleepSince: 0,
        held: [],
        inFlight: new Map(),
        lastActive: 0,
        busy: false,
        queued: [],
        yielding: false,
        sleeping: false,
        operations: new Map(),
        residentFrom: isResident(model.initialTier) ? 0 : undefined,
        residentMs: 0,
      });
    }
    for (const request of requests) {
      if (!this.replicas.has(request.model))
        throw new Error(`the trace names an unknown model ${request.model}`);
    }
  }

  run(): SimResult {
    const total = this.requests.length;
    for (const request of this.requests) this.queue.schedule(request.at, () => this.arrive(request));
    this.settle();
    let events = 0;
    while (this.outcomes.size < total) {
      const event = this.queue.pop();
      if (!event) {
        this.violations.push(
          `t=${this.now}: nothing left to happen with ${total - this.outcomes.size} requests open`,
        );
        break;
      }
      if (++events > maxEvents) throw new Error(`more than ${maxEvents} events: a loop in the simulation`);
      this.now = event.at;
      event.run();
      this.dirty = true;
      if (this.queue.peek() !== this.now) this.settle();
    }
    const endMs = this.now;
    const residentMs: Record<string, number> = {};
    for (const replica of this.replicas.values()) {
      const open = replica.residentFrom === undefined ? 0 : endMs - replica.residentFrom;
      residentMs[replica.model.id] = replica.residentMs + open;
    }
    return {
      policy: this.policy.name,
      outcomes: [...this.outcomes.values()].sort((a, b) => a.id - b.id),
      transitions: this.transitions,
      swaps: this.swaps,
      endMs,
      residentMs,
      violations: this.violations,
      events,
    };
  }

  // The activator: hold, dispatch within concurrency, refuse past the budget.

  private arrive(request: TraceRequest): void {
    const replica = this.replicas.get(request.model)!;
    replica.lastRequestAt = this.now;
    replica.lastActive = this.now;
    if (replica.tier === "ready" && this.hasCapacity(replica)) {
      this.dispatch(replica, request);
      return;
    }
    if (replica.held.length >= this.config.tier.queueDepth) {
      this.end(request, { dispatched: undefined, holdMs: 0, result: "refused" });
      return;
    }
    if (replica.held.length === 0) replica.heldSince = this.now;
    const held: HeldRequest = {
      request,
      expiry: this.queue.schedule(this.now + this.config.tier.holdBudget, () => this.expire(replica, held)),
    };
    replica.held.push(held);
  }

  private expire(replica: Replica, held: HeldRequest): void {
    const index = replica.held.indexOf(held);
    if (index < 0) return;
    replica.held.splice(index, 1);
    if (replica.held.length === 0) replica.heldSince = undefined;
    this.end(held.request, { holdMs: this.now - held.request.at, result: "refused" });
  }

  private hasCapacity(replica: Replica): boolean {
    const limit = this.config.tier.concurrency;
    return limit === 0 || replica.inFlight.size < limit;
  }

  private dispatchHeld(replica: Replica): void {
    while (replica.held.length > 0 && replica.tier === "ready" && this.hasCapacity(replica)) {
      const held = replica.held.shift()!;
      held.expiry.cancel();
      this.dispatch(replica, held.request);
    }
    if (replica.held.length === 0) replica.heldSince = undefined;
  }

  private dispatch(replica: Replica, request: TraceRequest): void {
    const dispatched = this.now;
    const finish = this.queue.schedule(this.now + serviceMs(request, replica.model.engine), () => {
      replica.inFlight.delete(request.id);
      replica.lastActive = this.now;
      this.end(request, { dispatched, holdMs: dispatched - request.at, result: "served" });
      this.dispatchHeld(replica);
      if (replica.inFlight.size === 0) replica.idleWaiter?.();
    });
    replica.inFlight.set(request.id, { request, dispatched, finish });
  }

  private end(
    request: TraceRequest,
    outcome: Pick<RequestOutcome, "dispatched" | "holdMs" | "result">,
  ): void {
    if (this.outcomes.has(request.id)) this.violations.push(`request ${request.id} ended twice`);
    this.outcomes.set(request.id, {
      id: request.id,
      model: request.model,
      arrived: request.at,
      ended: this.now,
      ...outcome,
    });
  }

  // The engine and its controller: one operation at a time.

  private setTier(replica: Replica, tier: Tier): void {
    const from = replica.tier;
    replica.tier = tier;
    replica.since = this.now;
    if (isAsleep(tier) && !isAsleep(from)) replica.asleepSince = this.now;
    if (isResident(tier) && replica.residentFrom === undefined) replica.residentFrom = this.now;
    if (!isResident(tier) && replica.residentFrom !== undefined) {
      replica.residentMs += this.now - replica.residentFrom;
      replica.residentFrom = undefined;
    }
    this.dirty = true;
    // The activator hears of the new tier at once and releases what it holds.
    if (tier === "ready") this.dispatchHeld(replica);
  }

  private exclusive(replica: Replica, operation: (done: () => void) => void, after?: () => void): void {
    if (replica.busy) {
      replica.queued.push(() => this.exclusive(replica, operation, after));
      return;
    }
    replica.busy = true;
    operation(() => {
      replica.busy = false;
      this.dirty = true;
      after?.();
      replica.queued.shift()?.();
    });
  }

  private later(ms: number, then: () => void): void {
    this.queue.schedule(this.now + ms, then);
  }

  private operationMs(replica: Replica, operation: EngineOperation): number {
    const count = replica.operations.get(operation) ?? 0;
    replica.operations.set(operation, count + 1);
    return operationMs(replica.model.engine, replica.model.id, operation, count, this.config.seed);
  }

  /** Start from cold or wake from sleep, then warm up. */
  private activate(replica: Replica, done: () => void): void {
    const from = replica.tier;
    const kind = from === "cold" ? "start" : from === "asleep-2" ? "wake-2" : "wake-1";
    this.setTier(replica, kind === "start" ? "starting" : "waking");
    const warmup = this.config.tier.warmup ? this.operationMs(replica, "warmup") : 0;
    this.later(this.operationMs(replica, kind) + warmup, () => {
      replica.lastActive = this.now;
      this.setTier(replica, "ready");
      done();
    });
  }

  /** Stop routing, let in-flight requests finish (bounded: the rest is cut), then sleep or stop. */
  private drainThen(
    replica: Replica,
    next: 1 | 2 | "stop",
    drainTimeout: number,
    done: () => void,
    drained?: () => void,
  ): void {
    this.setTier(replica, "draining");
    this.whenIdle(replica, this.now + drainTimeout, () => {
      if (replica.tier !== "draining") return done(); // demand came back and took it
      drained?.();
      if (next === "stop") return this.stop(replica, done);
      // The activators end what still runs at the drain's end; the engine then sleeps.
      this.cut(replica);
      replica.sleeping = true;
      this.later(this.operationMs(replica, next === 1 ? "sleep-1" : "sleep-2"), () => {
        replica.sleeping = false;
        this.setTier(replica, next === 1 ? "asleep-1" : "asleep-2");
        done();
      });
    });
  }

  private deepen(replica: Replica, done: () => void): void {
    this.later(this.operationMs(replica, "sleep-2"), () => {
      this.setTier(replica, "asleep-2");
      done();
    });
  }

  /** Ends every request in flight to `replica` unanswered. */
  private cut(replica: Replica): void {
    for (const { request, dispatched, finish } of replica.inFlight.values()) {
      finish.cancel();
      this.end(request, { dispatched, holdMs: dispatched - request.at, result: "cut" });
    }
    replica.inFlight.clear();
  }

  private stop(replica: Replica, done: () => void): void {
    this.later(this.operationMs(replica, "stop"), () => {
      this.cut(replica);
      this.setTier(replica, "cold");
      done();
    });
  }

  /** Calls `then` once nothing is in flight, or at `deadline`, whichever comes first. */
  private whenIdle(replica: Replica, deadline: number, then: () => void): void {
    if (replica.inFlight.size === 0) {
      this.later(0, then);
      return;
    }
    let called = false;
    const once = () => {
      if (called) return;
      called = true;
      replica.idleWaiter = undefined;
      timer.cancel();
      then();
    };
    const timer = this.queue.schedule(deadline, once);
    replica.idleWaiter = once;
  }

  // Decisions: the ladder per replica, the policy for the slot.

  private settle(): void {
    for (let round = 0; this.dirty; round++) {
      if (round >= maxSettleRounds) throw new Error(`t=${this.now}: decisions do not settle`);
      this.dirty = false;
      for (const replica of this.replicas.values()) this.reconcile(replica);
      this.evaluateSlot();
    }
    const residents = [...this.replicas.values()].filter((r) => r.model.inSlot && isResident(r.tier));
    if (residents.length > 1)
      this.violations.push(`t=${this.now}: ${residents.map((r) => r.model.id).join(", ")} resident together`);
  }

  /** ModelController.reconcile: the ladder decides, except that a slot member activates only by the slot. */
  private reconcile(replica: Replica): void {
    if (replica.busy) {
      // Demand during an idle drain takes the replica back (not during a swap, nor inside the sleep call).
      if (replica.tier === "draining" && replica.held.length > 0 && !replica.yielding && !replica.sleeping) {
        this.setTier(replica, "ready");
        replica.idleWaiter?.(); // the drain loop notices at once and ends
      }
      return;
    }
    const action = decideTier(
      {
        tier: replica.tier,
        since: replica.since,
        asleepSince: replica.asleepSince,
        inFlight: replica.inFlight.size,
        held: replica.held.length,
        lastActive: replica.lastActive,
        now: this.now,
        backoffUntil: 0,
      },
      this.config.tier,
    );
    switch (action.kind) {
      case "wait":
        this.setTimer(replica, action.at);
        return;
      case "start":
      case "wake":
        if (!replica.model.inSlot) this.exclusive(replica, (done) => this.activate(replica, done));
        return;
      case "undrain":
        this.setTier(replica, "ready");
        return;
      case "drain-and-sleep":
        this.exclusive(replica, (done) =>
          this.drainThen(replica, action.level, this.config.tier.drainTimeout, done),
        );
        return;
      case "drain-and-stop":
        this.exclusive(replica, (done) =>
          this.drainThen(replica, "stop", this.config.tier.drainTimeout, done),
        );
        return;
      case "deepen":
        this.exclusive(replica, (done) => this.deepen(replica, done));
        return;
      case "stop":
        this.exclusive(replica, (done) => this.stop(replica, done));
        return;
    }
  }

  private setTimer(replica: Replica, at: number): void {
    if (replica.timer?.at === at) return;
    replica.timer?.cancel();
    replica.timer = Number.isFinite(at) ? this.queue.schedule(Math.max(at, this.now), () => {}) : undefined;
  }

  private evaluateSlot(): void {
    if (this.slotBusy) return;
    const members = [...this.replicas.values()].filter((r) => r.model.inSlot);
    const decision = this.policy.decide({
      ...this.config.slot,
      members: members.map((r) => this.view(r)),
      residentSince: this.residentSince,
      lastSwapAt: this.lastSwapAt,
      now: this.now,
    });
    if (decision.kind === "wait") {
      // Slot.evaluate: look again at `at`, never sooner than 1 ms from now.
      const at = Number.isFinite(decision.at) ? Math.max(decision.at, this.now + 1) : undefined;
      if (this.slotTimer?.at === at) return;
      this.slotTimer?.cancel();
      this.slotTimer = at === undefined ? undefined : this.queue.schedule(at, () => {});
      return;
    }
    this.slotTimer?.cancel();
    this.slotTimer = undefined;
    this.carryOut(
      decision,
      members.find((r) => isResident(r.tier)),
    );
  }

  private view(replica: Replica): BenchSlotMember {
    return {
      model: replica.model.id,
      priority: replica.model.priority,
      tier: replica.tier,
      inFlight: replica.inFlight.size,
      held: replica.held.length,
      heldSince: this.config.heldSince === "oldest-held" ? replica.held[0]?.request.at : replica.heldSince,
      backoffUntil: 0,
      lastRequestAt: replica.lastRequestAt,
    };
  }

  /** Slot.carryOut: a swap first drains and sleeps the resident, then the target activates. */
  private carryOut(decision: Exclude<SlotDecision, { kind: "wait" }>, resident: Replica | undefined): void {
    this.slotBusy = true;
    this.dirty = true;
    const target = this.replicas.get(decision.to)!;
    const transition: SlotTransition = {
      kind: decision.kind,
      from: resident?.model.id,
      to: decision.to,
      reason: decision.reason,
      decidedAt: this.now,
    };
    this.transitions.push(transition);
    const activateTarget = () =>
      this.exclusive(
        target,
        (done) => (target.tier === "cold" || isAsleep(target.tier) ? this.activate(target, done) : done()),
        () => {
          this.residentSince = this.now;
          transition.readyAt = this.now;
          if (decision.kind === "swap" && resident) {
            this.lastSwapAt = this.now;
            this.swaps++;
          }
          this.slotBusy = false;
        },
      );
    if (decision.kind !== "swap" || !resident) {
      activateTarget();
      return;
    }
    this.exclusive(
      resident,
      (done) => {
        if (resident.tier !== "ready") return done();
        resident.yielding = true;
        this.drainThen(
          resident,
          this.config.tier.sleepLevel,
          this.config.slot.drainTimeout,
          () => {
            resident.yielding = false;
            done();
          },
          () => {
            transition.drainedAt = this.now;
          },
        );
      },
      () => {
        transition.asleepAt = this.now;
        if (isResident(resident.tier)) {
          transition.calledOff = true;
          this.slotBusy = false;
          return;
        }
        activateTarget();
      },
    );
  }
}
