import { EngineError, type EngineLoad, type SleepMode } from "../../autoscaler/engine-client.ts";
import {
  type Departure,
  type Engine,
  type Platform,
  type RecordedTier,
  type Replica,
  type ReplicaSetView,
  WriteConflict,
} from "../../autoscaler/platform.ts";
import type { Clock } from "../../lib/clock.ts";
import type { Tier } from "../../lib/replica-event.ts";

export type EngineOp = "healthy" | "isSleeping" | "sleep" | "wake" | "warmup" | "load";

/** A call held until the test lets it go on (or fail). */
export interface Gate {
  /** The engine call reached the gate. */
  readonly reached: boolean;
  release(): void;
  fail(message: string): void;
}

interface OpenGate extends Gate {
  wait(): Promise<void>;
}

function gate(): OpenGate {
  let resolve!: () => void;
  let reject!: (error: Error) => void;
  const promise = new Promise<void>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  promise.catch(() => {});
  const g = {
    reached: false,
    release: () => resolve(),
    fail: (message: string) => reject(new Error(message)),
    wait: () => {
      g.reached = true;
      return promise;
    },
  };
  return g;
}

/** How an engine call fails: `local` when this process could not make it (`isLocalFailure`). */
interface Fault {
  message: string;
  timedOut: boolean;
  local?: boolean;
  /** The engine's answer status (`EngineError.status`). */
  status?: number;
}

/**
 * One fake vLLM engine: awake or asleep at a level, with faults, gates and latencies the test sets.
 * Every call is logged in order (`calls`, and the platform's `calls` prefixed with the replica id),
 * except `load`, which drains poll: it is counted in `loads`.
 */
export class FakeEngine implements Engine {
  readonly id: string;
  /** What `healthy()` answers while the engine runs. */
  healthyAnswer = true;
  /** Set: `healthy()` rejects with it (the engine client could not ask, as out of file descriptors). */
  healthyError?: Error;
  sleeping = false;
  level?: 1 | 2;
  /** Requests the engine runs and queues, as `load()` reports them. */
  running = 0;
  waiting = 0;
  warmups = 0;
  loads = 0;
  /** False once the replica is gone: every call fails like a refused connection. */
  alive = true;
  /** The timeout the last call of each operation was given. */
  readonly timeouts: Partial<Record<EngineOp, number>> = {};
  /** Milliseconds on the platform's clock that each operation takes. */
  readonly latency: Partial<Record<EngineOp, number>> = {};
  readonly calls: string[] = [];
  private readonly clock: Clock;
  private readonly note: (entry: string) => void;
  private readonly faults = new Map<EngineOp, Fault[]>();
  private readonly gates = new Map<EngineOp, OpenGate[]>();

  constructor(id: string, clock: Clock, note: (entry: string) => void) {
    this.id = id;
    this.clock = clock;
    this.note = note;
  }

  /** The next `times` calls of `op` fail with `message` (after their gate and latency). */
  failNext(op: EngineOp, message = `${op} failed`, times = 1): void {
    for (let i = 0; i < times; i++) this.queueFault(op, { message, timedOut: false });
  }

  /** The next call of `op` gets no answer in its time (the engine client's `timedOut` error). */
  timeOutNext(op: EngineOp): void {
    this.queueFault(op, { message: `${op}: no answer within its timeout`, timedOut: true });
  }

  /** The next call of `op` cannot be made by this process (out of file descriptors): `isLocalFailure`. */
  localFailNext(op: EngineOp, message = `${op}: connect EMFILE`): void {
    this.queueFault(op, { message, timedOut: false, local: true });
  }

  /** The next call of `op` is answered 401, as vLLM's `--api-key` answers one without the key. */
  unauthorizedNext(op: EngineOp): void {
    this.queueFault(op, {
      message: `${op} answered 401: {"error":"Unauthorized"}`,
      timedOut: false,
      status: 401,
    });
  }

  private queueFault(op: EngineOp, fault: Fault): void {
    this.faults.set(op, [...(this.faults.get(op) ?? []), fault]);
  }

  /** Forgets the faults not yet used. */
  clearFaults(): void {
    this.faults.clear();
  }

  /** The next call of `op` waits until the test releases (or fails) the gate returned. */
  hold(op: EngineOp): Gate {
    const g = gate();
    this.gates.set(op, [...(this.gates.get(op) ?? []), g]);
    return g;
  }

  async healthy(_timeoutMs?: number): Promise<boolean> {
    try {
      await this.enter("healthy", "healthy");
    } catch {
      return false;
    }
    if (this.healthyError) throw this.healthyError;
    return this.healthyAnswer;
  }

  async isSleeping(_timeoutMs?: number): Promise<boolean> {
    await this.enter("isSleeping", "isSleeping");
    return this.sleeping;
  }

  /** What `vllm:engine_sleep_state` would say (not logged in `calls`: it is a metrics read). */
  async sleepLevel(_timeoutMs?: number): Promise<0 | 1 | 2 | undefined> {
    if (!this.alive) throw new Error("connection refused");
    return this.sleeping ? (this.level ?? 1) : 0;
  }

  /** The signal the last call of each long operation was given to abandon it (engine-call-watch.ts). */
  readonly abandons: Partial<Record<"sleep" | "wake" | "warmup", AbortSignal>> = {};

  /** The signal the last sleep call was given to abandon it. */
  get sleepAbandon(): AbortSignal | undefined {
    return this.abandons.sleep;
  }

  async sleep(level: 1 | 2, mode: SleepMode, _timeoutMs: number, abandon?: AbortSignal): Promise<void> {
    await this.abandonable("sleep", `sleep(${level},${mode})`, abandon);
    // vLLM ignores a sleep while asleep.
    if (this.sleeping) return;
    this.sleeping = true;
    this.level = level;
  }

  async wake(fromLevel: 1 | 2, timeoutMs: number, abandon?: AbortSignal): Promise<void> {
    this.timeouts.wake = timeoutMs;
    await this.abandonable("wake", `wake(${fromLevel})`, abandon);
    this.sleeping = false;
    this.level = undefined;
  }

  async warmup(_model: string, timeoutMs: number, abandon?: AbortSignal): Promise<void> {
    this.timeouts.warmup = timeoutMs;
    await this.abandonable("warmup", "warmup", abandon);
    if (this.sleeping) throw new Error("warm-up sent to a sleeping engine");
    this.warmups++;
  }

  async load(_timeoutMs?: number): Promise<EngineLoad> {
    this.loads++;
    await this.enter("load");
    return { running: this.running, waiting: this.waiting };
  }

  /** As the engine client does, an abandoned call rejects at once, whatever the engine does. */
  private async abandonable(
    op: "sleep" | "wake" | "warmup",
    entry: string,
    abandon?: AbortSignal,
  ): Promise<void> {
    this.abandons[op] = abandon;
    const abandoned = new Promise<never>((_, reject) =>
      abandon?.addEventListener("abort", () => reject(new Error(`${op} call abandoned`)), { once: true }),
    );
    abandoned.catch(() => {});
    await Promise.race([this.enter(op, entry), abandoned]);
  }

  private async enter(op: EngineOp, entry?: string): Promise<void> {
    if (entry !== undefined) {
      this.calls.push(entry);
      this.note(entry);
    }
    if (!this.alive) throw new Error(`connect ECONNREFUSED (${this.id} is gone)`);
    const g = this.gates.get(op)?.shift();
    if (g) await g.wait();
    const ms = this.latency[op];
    if (ms !== undefined && ms > 0) await new Promise<void>((resolve) => this.clock.setTimeout(resolve, ms));
    if (!this.alive) throw new Error(`connect ECONNREFUSED (${this.id} is gone)`);
    const fault = this.faults.get(op)?.shift();
    if (fault?.local) throw new EngineError(fault.message, undefined, false, true);
    if (fault?.status !== undefined) throw new EngineError(fault.message, fault.status);
    if (fault !== undefined) throw Object.assign(new Error(fault.message), { timedOut: fault.timedOut });
  }
}

export interface FakePlatformOptions {
  clock: Clock;
  /**
   * New replicas are up at once (true), after this many ms on the clock (a number), or only when
   * the test calls `bringUp` (false, the default).
   */
  autoUp?: boolean | number;
  /** The machine each model's replicas run on (default `node-a`). */
  node?: (model: string) => string;
  /** Keep each recorded tier on the replica (like pod annotations), for a later leader to adopt. */
  keepRecordedTiers?: boolean;
  /** Called for each new engine (to set latencies, faults or load). */
  onEngine?: (engine: FakeEngine, model: string) => void;
  /**
   * A scale-up raises the count, and its replicas appear only when the test calls `createPending`
   * (a Deployment whose pods the ReplicaSet controller has not created yet; a local start waiting
   * for its port).
   */
  createLater?: boolean;
}

interface ModelEntry {
  scale: number;
  scalable: boolean;
  keepFailedStarts?: boolean;
  progressDeadline?: number;
  replicas: Map<string, Replica>;
}

export interface ScaleCall {
  model: string;
  expected: number;
  to: number;
  remove: string[];
  outcome: "ok" | "refused" | "failed";
}

export interface TierRecord {
  model: string;
  replica: string;
  tier: Tier;
  since: number;
  believed?: Tier;
}

/**
 * A replica set per model in memory: `scale` adds replicas (not up until `bringUp`, unless
 * `autoUp`) and removes the named ones first; a replica that leaves on its own (`crash`) is a
 * departure. Every scale, tier record and engine call is logged for the test to assert.
 */
export class FakePlatform implements Platform {
  readonly scales: ScaleCall[] = [];
  readonly tierRecords: TierRecord[] = [];
  /** Engine calls (`a-1 wake(1)`) and scales (`scale a 0->1`, `scale a 1->0 -a-1`), in order. */
  readonly calls: string[] = [];
  private readonly options: FakePlatformOptions;
  private readonly models = new Map<string, ModelEntry>();
  private readonly engines = new Map<string, FakeEngine>();
  private readonly listeners: ((model: string, departure?: Departure) => void)[] = [];
  private sequence = 0;
  private readonly missing = new Set<string>();
  private refuseNextScale = 0;
  private failNextScale = 0;
  private spareNamedNext = 0;
  /**
   * Tier writes to refuse, each once, as an API server that throttles (429) or fails (500) a write
   * refuses it: the next write of each tier listed here throws. What the fails were is in `calls`.
   */
  readonly refuseTierWrites: Tier[] = [];
  private readonly tierWriteGates = new Map<Tier, OpenGate>();
  /** What each replica's engine printed last, by replica id (`Platform.lastOutput`). */
  readonly output = new Map<string, string>();
  closed = false;

  constructor(models: Iterable<string>, options: FakePlatformOptions) {
    this.options = options;
    for (const model of models) this.addModel(model);
  }

  addModel(model: string, scalable = true): void {
    this.models.set(model, { scale: 0, scalable, replicas: new Map() });
  }

  // --- Platform ---

  replicaSet(model: string): ReplicaSetView | undefined {
    const entry = this.models.get(model);
    if (!entry) return undefined;
    return {
      replicas: [...entry.replicas.values()],
      scale: entry.scale,
      scalable: entry.scalable,
      selector: "",
      ...(entry.keepFailedStarts ? { keepFailedStarts: true } : {}),
      ...(entry.progressDeadline !== undefined ? { progressDeadline: entry.progressDeadline } : {}),
    };
  }

  async scale(model: string, expected: number, to: number, remove: readonly Replica[]): Promise<void> {
    const entry = this.entry(model);
    const call: ScaleCall = { model, expected, to, remove: remove.map((r) => r.id), outcome: "ok" };
    this.scales.push(call);
    if (this.failNextScale > 0) {
      this.failNextScale--;
      call.outcome = "failed";
      this.calls.push(`scale ${model} failed (${expected}->${to})`);
      throw new Error("the API server answered 500 Internal Server Error");
    }
    if (this.refuseNextScale > 0 || entry.scale !== expected) {
      this.refuseNextScale = Math.max(0, this.refuseNextScale - 1);
      call.outcome = "refused";
      this.calls.push(`scale ${model} refused (${expected}->${to}, has ${entry.scale})`);
      throw new WriteConflict(`${model} has ${entry.scale} replicas, not ${expected}`);
    }
    this.calls.push(
      `scale ${model} ${expected}->${to}${call.remove.length ? ` -${call.remove.join(" -")}` : ""}`,
    );
    entry.scale = to;
    while (!this.options.createLater && entry.replicas.size < to) this.create(model, entry);
    if (entry.replicas.size > to) {
      const named = new Set(call.remove);
      const all = [...entry.replicas.values()];
      const first = all.filter((r) => named.has(r.id));
      const others = all.filter((r) => !named.has(r.id)).reverse();
      const spare = this.spareNamedNext > 0;
      this.spareNamedNext = Math.max(0, this.spareNamedNext - 1);
      const victims = (spare ? [...others, ...first] : [...first, ...others]).slice(
        0,
        entry.replicas.size - to,
      );
      for (const victim of victims) this.drop(entry, victim.id);
    }
    this.changed(model);
  }

  /** The next write of `tier` waits until the test releases the gate (a slow API server, a slow disk). */
  holdTierWrite(tier: Tier): Gate {
    const g = gate();
    this.tierWriteGates.set(tier, g);
    return g;
  }

  async recordTier(
    model: string,
    replica: Replica,
    { tier, since }: RecordedTier,
    believed?: Tier,
  ): Promise<void> {
    const held = this.tierWriteGates.get(tier);
    if (held) {
      this.tierWriteGates.delete(tier);
      await held.wait();
    }
    const refused = this.refuseTierWrites.indexOf(tier);
    if (refused >= 0) {
      this.refuseTierWrites.splice(refused, 1);
      this.calls.push(`record ${replica.id} ${tier} refused`);
      throw new Error(`429 TooManyRequests: the tier write of ${replica.id} (${tier}) was throttled`);
    }
    this.tierRecords.push({ model, replica: replica.id, tier, since, believed });
    const entry = this.models.get(model);
    const current = entry?.replicas.get(replica.id);
    if (this.options.keepRecordedTiers && entry && current)
      entry.replicas.set(replica.id, { ...current, recorded: { tier, since } });
  }

  lastOutput(_model: string, replica: string): string | undefined {
    return this.output.get(replica);
  }

  engine(replica: Replica): FakeEngine {
    let engine = this.engines.get(replica.id);
    if (!engine) {
      // A replica the platform does not know: an engine that refuses every call.
      engine = new FakeEngine(replica.id, this.options.clock, () => {});
      engine.alive = false;
    }
    return engine;
  }

  onChange(listener: (model: string, departure?: Departure) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    this.closed = true;
  }

  // --- what the test does ---

  /** The engine of a replica by id (also after the replica left). */
  engineOf(id: string): FakeEngine {
    const engine = this.engines.get(id);
    if (!engine) throw new Error(`no engine ${id}`);
    return engine;
  }

  /** Every engine ever created, by replica id. */
  allEngineIds(): string[] {
    return [...this.engines.keys()];
  }

  replica(id: string): Replica | undefined {
    for (const entry of this.models.values()) {
      const replica = entry.replicas.get(id);
      if (replica) return replica;
    }
    return undefined;
  }

  replicas(model: string): Replica[] {
    return [...this.entry(model).replicas.values()];
  }

  /** Ids of the model's replicas now. */
  ids(model: string): string[] {
    return [...this.entry(model).replicas.keys()];
  }

  /** The scale count now. */
  count(model: string): number {
    return this.entry(model).scale;
  }

  /**
   * The engine of `id` answers: the platform sees it up (and, with `answeredAt`, says when it heard
   * its /health answer itself, as local mode does).
   */
  bringUp(id: string, heard: { answeredAt?: number } = {}): void {
    const { model, entry, replica } = this.locate(id);
    entry.replicas.set(id, { ...replica, up: true, ...heard });
    this.changed(model);
  }

  /** The replicas a scale-up asked for and `createLater` kept back appear now. */
  createPending(model: string): void {
    const entry = this.entry(model);
    while (entry.replicas.size < entry.scale) this.create(model, entry);
    this.changed(model);
  }

  /** The model's engine settings changed (a config reload): every replica it has now is outdated. */
  outdate(model: string): void {
    const entry = this.entry(model);
    for (const [id, replica] of entry.replicas) entry.replicas.set(id, { ...replica, outdated: true });
    this.changed(model);
  }

  /** The replica leaves on its own (the process exited, the pod was deleted): a departure. */
  crash(id: string, reason: string): void {
    const { model, entry } = this.locate(id);
    this.drop(entry, id);
    // Nobody asked for a replacement: the set is one smaller, as local mode's is.
    entry.scale = Math.max(0, entry.scale - 1);
    this.calls.push(`crash ${id}`);
    this.changed(model, { replica: id, reason });
  }

  /**
   * The platform sees that the replica cannot come up as it is (a pod whose image cannot be
   * pulled, an engine in a crash loop): `failing` says why; undefined clears it.
   */
  fail(id: string, reason: string | undefined, restarts?: number): void {
    const { model, entry, replica } = this.locate(id);
    const { failing: _, ...rest } = replica;
    entry.replicas.set(id, {
      ...rest,
      ...(reason !== undefined ? { failing: reason } : {}),
      ...(restarts !== undefined ? { restarts } : {}),
    });
    this.changed(model);
  }

  /** The engine restarted in place (the kubelet's restart count grows); it comes back awake. */
  restart(id: string, up = true): void {
    const { model, entry, replica } = this.locate(id);
    const engine = this.engineOf(id);
    engine.sleeping = false;
    engine.level = undefined;
    entry.replicas.set(id, { ...replica, restarts: replica.restarts + 1, up });
    this.changed(model);
  }

  /** The count is no longer Snooze's to change (a Knative Service's pods belong to Knative). */
  pinScale(model: string): void {
    this.entry(model).scalable = false;
    this.changed(model);
  }

  /**
   * A replica whose start failed is kept until startTimeout (a Knative revision's before its initial
   * scale), or sooner past the revision's `progressDeadline` (ms) when one is given.
   */
  keepFailedStarts(model: string, keep = true, progressDeadline?: number): void {
    const entry = this.entry(model);
    entry.keepFailedStarts = keep;
    entry.progressDeadline = progressDeadline;
    this.changed(model);
  }

  /**
   * The model's workload is gone (a Model naming a Deployment that does not exist): no replica set,
   * and `missingWorkload` says why; `restoreWorkload` brings an empty one back.
   */
  removeWorkload(model: string): void {
    this.models.delete(model);
    this.missing.add(model);
    this.changed(model);
  }

  restoreWorkload(model: string): void {
    this.missing.delete(model);
    this.addModel(model);
    this.changed(model);
  }

  missingWorkload(model: string): string | undefined {
    return this.missing.has(model) ? `Deployment "${model}" does not exist` : undefined;
  }

  /** The next `times` scale calls fail as an API server that errs does (not a conflict); 0: none. */
  failScales(times: number): void {
    this.failNextScale = times;
  }

  /** The next `times` scale calls are refused as if the count changed under the caller. */
  refuseScales(times = 1): void {
    this.refuseNextScale += times;
  }

  /**
   * The next `times` scale-downs remove other replicas than the named ones, as a ReplicaSet may
   * when two pods carry the same deletion cost.
   */
  spareNamed(times = 1): void {
    this.spareNamedNext += times;
  }

  private entry(model: string): ModelEntry {
    const entry = this.models.get(model);
    if (!entry) throw new Error(`no model ${model}`);
    return entry;
  }

  private locate(id: string): { model: string; entry: ModelEntry; replica: Replica } {
    for (const [model, entry] of this.models) {
      const replica = entry.replicas.get(id);
      if (replica) return { model, entry, replica };
    }
    throw new Error(`no replica ${id}`);
  }

  private create(model: string, entry: ModelEntry): void {
    const n = ++this.sequence;
    const id = `${model}-${n}`;
    const replica: Replica = {
      id,
      label: `fake engine ${id}`,
      uid: `uid-${n}`,
      address: `10.0.0.${n}:8000`,
      up: this.options.autoUp === true,
      createdAt: this.options.clock.now(),
      restarts: 0,
      node: this.options.node?.(model) ?? "node-a",
    };
    entry.replicas.set(id, replica);
    const engine = new FakeEngine(id, this.options.clock, (call) => this.calls.push(`${id} ${call}`));
    this.engines.set(id, engine);
    this.options.onEngine?.(engine, model);
    const delay = this.options.autoUp;
    if (typeof delay === "number")
      this.options.clock.setTimeout(() => {
        if (entry.replicas.get(id)?.uid === replica.uid) this.bringUp(id);
      }, delay);
  }

  private drop(entry: ModelEntry, id: string): void {
    entry.replicas.delete(id);
    const engine = this.engines.get(id);
    if (engine) engine.alive = false;
  }

  private changed(model: string, departure?: Departure): void {
    for (const listener of this.listeners) listener(model, departure);
  }
}
