import { setTimeout as sleep } from "node:timers/promises";
import { group, version } from "../lib/kube/api-group.ts";
import { isConflict, type KubeClient, type KubeObject, paths } from "../lib/kube/client.ts";
import type { Condition } from "../lib/kube/condition.ts";
import type { KubeModel } from "../lib/kube/model-config.ts";
import type { ModelResource } from "../lib/kube/model-resource.ts";
import {
  type Pod,
  podAddress,
  podLive,
  podReady,
  recordedSince,
  recordedTier,
} from "../lib/kube/pod-replica.ts";
import type { Logger } from "../lib/log.ts";
import { isAsleep, type Tier } from "../lib/replica-event.ts";
import { decideReplicas, type ReplicaAction, type ReplicaView } from "./horizontal.ts";
import type { KubePlatform, WorkloadRef } from "./kube-platform.ts";
import type { AutoscalerMetrics } from "./metrics.ts";
import { modelStatus } from "./model-status.ts";
import { isResident, type SlotMember } from "./slot-arbiter.ts";

export interface KubeModelDeps {
  platform: KubePlatform;
  client: KubeClient;
  log: Logger;
  metrics: AutoscalerMetrics;
  /** The model's pods, from the shared pod cache. */
  pods(): Pod[];
  /** The workload's replica count and pod selector, from the workload cache; undefined while unknown. */
  workload(): { replicas: number; selector: string; scalable: boolean } | undefined;
  /** The Model object as last seen (for status writes). */
  resource(): (ModelResource & KubeObject) | undefined;
  /** Time for activators to see a pod draining before its engine is checked for idleness. */
  drainGraceMs: number;
  /**
   * Whether the Lease is still ours right now (renewed within the renew deadline). Checked before
   * every decision and write: a holder that was paused must not act on the moment it resumes.
   */
  holding(): boolean;
  /** Set for a slot member: the slot decides when it may be awake, and hears of every change. */
  slot?: { changed(): void };
}

interface PodRecord {
  name: string;
  uid: string;
  pod: Pod;
  tier: Tier;
  since: number;
  asleepSince: number;
  /** The tier written on the pod (what the next conditional write expects to find). */
  recorded?: Tier;
  busy: boolean;
  /** A sleep or stop is under way: a returning request can no longer take it back. */
  leaving: boolean;
  /** No new operation before this moment (after a failure). */
  coolUntil: number;
  restarts: number;
  /** Tier writes run in order, one at a time. */
  writes: Promise<unknown>;
}

/** This leadership ended while an operation ran: drop it, the next leader decides. */
class NotLeading extends Error {}

const maxBackoffMs = 60_000;
/** An activator that stopped reporting for this long no longer counts. */
const activatorExpiryMs = 5_000;

/**
 * Drives the pods of one Model along the tier ladder while this autoscaler replica holds the
 * Model's Lease (or its slot's). Each pass reads the pods and the load, asks the pure
 * `decideReplicas` what to do, and runs each pod's operation on its own lifetime; the tier of each
 * pod goes into its annotations and the counts into the Model's status.
 */
export class KubeModelController {
  model: KubeModel;
  private readonly deps: KubeModelDeps;
  private readonly log: Logger;
  private leadership = 0;
  private leading = false;
  private readonly records = new Map<string, PodRecord>();
  private readonly activators = new Map<string, { inFlight: number; held: number; at: number }>();
  private heldSince?: number;
  private lastActive = Date.now();
  private failures = 0;
  private backoffUntil = 0;
  private lastError?: string;
  private lastWakeMs?: number;
  private lastStartMs?: number;
  private scaling = false;
  private scaleOverride?: { replicas: number; until: number };
  private timer?: NodeJS.Timeout;
  private heartbeat?: NodeJS.Timeout;
  private pendingPass = false;
  /** The slot's limit on awake replicas, set before each pass of a slot member. */
  cap?: number;
  private statusDirty = false;
  private statusWriting?: Promise<void>;
  private lastStatusJson = "";
  /** Counters for tests and the state endpoint. */
  readonly counts = { statusWrites: 0, statusConflicts: 0, tierWrites: 0, scales: 0 };

  constructor(model: KubeModel, deps: KubeModelDeps) {
    this.model = model;
    this.deps = deps;
    this.log = deps.log.child({ model: model.config.id, object: model.key });
  }

  get isLeading(): boolean {
    return this.leading;
  }

  get ref(): WorkloadRef {
    const { workloadRef } = this.model.spec;
    return { namespace: this.model.namespace, ...workloadRef };
  }

  update(model: KubeModel): void {
    this.model = model;
    this.changed();
  }

  /** This replica now holds the Lease: rebuild each pod's state from its annotations and act. */
  lead(): void {
    this.leadership++;
    this.leading = true;
    this.records.clear();
    this.lastActive = Date.now();
    this.lastStatusJson = "";
    this.heartbeat = setInterval(() => this.changed(), 1_000);
    this.heartbeat.unref();
    this.changed();
  }

  /** The Lease is gone: stop acting at once; running operations drop at their next write. */
  standDown(): void {
    this.leadership++;
    this.leading = false;
    clearTimeout(this.timer);
    clearInterval(this.heartbeat);
    this.records.clear();
  }

  close(): void {
    this.standDown();
  }

  /** A request is held in `activator`: act now. */
  demand(activator: string, unreachable?: string): void {
    const now = Date.now();
    const entry = this.activators.get(activator) ?? { inFlight: 0, held: 0, at: now };
    this.activators.set(activator, { ...entry, held: Math.max(entry.held, 1), at: now });
    this.lastActive = now;
    this.heldSince ??= now;
    if (unreachable) {
      const record = this.records.get(unreachable);
      if (record && !record.busy) this.operate(record, "recheck", () => this.recheck(record));
    }
    this.changed();
  }

  stats(activator: string, inFlight: number, held: number): void {
    const now = Date.now();
    this.activators.set(activator, { inFlight, held, at: now });
    if (inFlight > 0 || held > 0) this.lastActive = now;
    this.changed();
  }

  /** The model's load, summed over the activators that reported recently. */
  load(now = Date.now()): { inFlight: number; held: number } {
    let inFlight = 0;
    let held = 0;
    for (const [id, entry] of this.activators) {
      if (now - entry.at > activatorExpiryMs) {
        this.activators.delete(id);
        continue;
      }
      inFlight += entry.inFlight;
      held += entry.held;
    }
    if (held > 0) this.heldSince ??= now;
    else this.heldSince = undefined;
    return { inFlight, held };
  }

  /** Something changed (pods, load, spec, a finished operation): look again soon. */
  changed(): void {
    if (!this.leading) return;
    if (this.deps.slot) {
      this.deps.slot.changed();
      return;
    }
    if (this.pendingPass) return;
    this.pendingPass = true;
    queueMicrotask(() => {
      this.pendingPass = false;
      this.pass();
    });
  }

  /** This member as its slot's arbiter sees it. */
  slotView(): SlotMember {
    this.syncRecords();
    const load = this.load();
    // A tier is only left once the pod says so too: until the write lands, activators still see
    // the old tier, so a replica leaving the slot counts as resident a little longer.
    const tiers = [...this.records.values()].map((r) =>
      r.recorded !== undefined && isResident(r.recorded) && !isResident(r.tier) ? r.recorded : r.tier,
    );
    const pending = this.pendingPods();
    const order: Tier[] = ["ready", "waking", "starting", "draining", "asleep-1", "asleep-2"];
    let tier: Tier = "cold";
    if (pending > 0 && !tiers.includes("ready") && !tiers.includes("waking")) tier = "starting";
    for (const t of order)
      if (tiers.includes(t) && (tier === "cold" || order.indexOf(t) < order.indexOf(tier))) tier = t;
    return {
      model: this.model.key,
      priority: this.model.config.priority,
      tier,
      inFlight: load.inFlight,
      held: load.held,
      heldSince: this.heldSince,
      backoffUntil: this.backoffUntil,
    };
  }

  /** One decision pass (a slot member's pass is started by its slot, with `cap` set). */
  pass(): void {
    if (!this.leading || !this.deps.holding()) return;
    clearTimeout(this.timer);
    this.syncRecords();
    const workload = this.deps.workload();
    if (!workload) {
      this.scheduleStatus();
      return;
    }
    const now = Date.now();
    const load = this.load(now);
    const views: ReplicaView[] = [...this.records.values()].map((r) => ({
      pod: r.name,
      tier: r.tier,
      since: r.since,
      asleepSince: r.asleepSince,
      podReady: podReady(r.pod),
      busy: r.busy || now < r.coolUntil,
      load: 0,
    }));
    const spec = this.model.spec;
    const plan = decideReplicas({
      replicas: views,
      pendingPods: this.pendingPods(),
      workloadReplicas: this.workloadReplicas(),
      desired: spec.replicas,
      minReplicas: spec.minReplicas,
      maxReplicas: spec.maxReplicas,
      inFlight: load.inFlight,
      held: load.held,
      lastActive: this.lastActive,
      now,
      backoffUntil: this.backoffUntil,
      cap: this.deps.slot ? this.cap : undefined,
      settings: this.model.config,
    });
    for (const action of plan.actions) this.act(action, workload.scalable);
    let next = plan.nextAt;
    for (const r of this.records.values()) if (r.coolUntil > now) next = Math.min(next, r.coolUntil);
    if (Number.isFinite(next)) {
      this.timer = setTimeout(() => this.changed(), Math.max(10, next - Date.now()));
      this.timer.unref();
    }
    this.scheduleStatus();
  }

  private act(action: ReplicaAction, scalable: boolean): void {
    if (action.kind === "scale-up" || action.kind === "stop") {
      if (this.scaling || !scalable) return;
      if (action.kind === "scale-up") this.scaleUp(action.to);
      else this.stopPods(action.pods.map((p) => this.records.get(p)!).filter(Boolean), action.to);
      return;
    }
    const record = this.records.get(action.pod);
    if (!record) return;
    switch (action.kind) {
      case "finish-start":
        this.operate(record, "finish-start", () => this.finishStart(record));
        return;
      case "wake":
        this.operate(record, "wake", () => this.wake(record, action.level));
        return;
      case "undrain":
        if (record.tier === "draining" && !record.leaving) void this.setTier(record, "ready").catch(() => {});
        return;
      case "drain-and-sleep":
        this.operate(record, "sleep", () => this.drainThen(record, action.level));
        return;
      case "drain-and-stop":
        this.operate(record, "stop", () => this.drainThen(record, "stop"));
        return;
      case "deepen":
        this.operate(record, "deepen", () => this.deepen(record));
        return;
      case "start-failed":
        this.failed(
          `start of ${this.model.config.id} failed: pod ${record.name} not ready within startTimeout`,
        );
        if (scalable && !this.scaling) this.stopPods([record], Math.max(0, this.workloadReplicas() - 1));
        return;
    }
  }

  // --- pods and their records ---

  private pendingPods(): number {
    const live = this.deps.pods().filter(podLive).length;
    return Math.max(0, this.workloadReplicas() - live);
  }

  private workloadReplicas(): number {
    const fromCache = this.deps.workload()?.replicas ?? 0;
    const override = this.scaleOverride;
    if (override && (Date.now() < override.until || this.scaling) && override.replicas !== fromCache)
      return override.replicas;
    this.scaleOverride = undefined;
    return fromCache;
  }

  /** Brings the records in line with the pods: new pods start, gone pods are forgotten. */
  private syncRecords(): void {
    const seen = new Set<string>();
    for (const pod of this.deps.pods()) {
      if (!podLive(pod)) continue;
      const name = pod.metadata.name;
      seen.add(name);
      const restarts = pod.status?.containerStatuses?.[0]?.restartCount ?? 0;
      let record = this.records.get(name);
      if (record && record.uid !== pod.metadata.uid) record = undefined;
      if (!record) {
        const recorded = recordedTier(pod);
        const since = recordedSince(pod) ?? (Date.parse(pod.metadata.creationTimestamp ?? "") || Date.now());
        record = {
          name,
          uid: pod.metadata.uid ?? "",
          pod,
          tier: recorded ?? "starting",
          since,
          asleepSince: since,
          recorded,
          busy: false,
          leaving: false,
          coolUntil: 0,
          restarts,
          writes: Promise.resolve(),
        };
        this.records.set(name, record);
        // Left mid-operation by a previous holder: find out where the engine really is.
        if (recorded === "waking" || recorded === "draining")
          this.operate(record, "recheck", () => this.recheck(record!));
        continue;
      }
      record.pod = pod;
      if (restarts > record.restarts && !record.busy) {
        // The engine restarted: it comes back awake and loaded, whatever it was before.
        this.log.warn("engine restarted", { pod: name, restarts });
        record.tier = "starting";
        record.since = Date.now();
      }
      record.restarts = restarts;
    }
    for (const name of [...this.records.keys()]) if (!seen.has(name)) this.records.delete(name);
  }

  // --- operations ---

  private operate(record: PodRecord, what: string, operation: () => Promise<void>): void {
    record.busy = true;
    const leadership = this.leadership;
    void operation()
      .catch((error: unknown) => {
        if (error instanceof NotLeading || leadership !== this.leadership) return;
        this.log.warn("operation failed", { pod: record.name, operation: what, error });
        record.coolUntil = Date.now() + 1_000;
      })
      .finally(() => {
        record.busy = false;
        if (leadership === this.leadership) this.changed();
      });
  }

  private guard(leadership: number): void {
    if (leadership !== this.leadership || !this.leading || !this.deps.holding()) throw new NotLeading();
  }

  /** Sets a pod's tier now (the slot and the next pass see it at once) and records it on the pod. */
  private setTier(record: PodRecord, tier: Tier): Promise<void> {
    const leadership = this.leadership;
    this.guard(leadership);
    const from = record.tier;
    const now = Date.now();
    if (isAsleep(tier) && !isAsleep(from)) record.asleepSince = now;
    record.tier = tier;
    record.since = now;
    if (from !== tier) this.deps.metrics.transition(this.model.config.id, from, tier);
    // Arrivals (ready, asleep, cold) at info; the steps between them at debug.
    const arrival = tier === "ready" || isAsleep(tier);
    this.log[arrival ? "info" : "debug"]("tier", { pod: record.name, from, to: tier });
    const write = record.writes.then(async () => {
      this.guard(leadership);
      const updated = await this.deps.platform.recordTier(record.pod, tier, now, record.recorded);
      this.counts.tierWrites++;
      record.recorded = tier;
      record.pod = updated;
    });
    record.writes = write.catch(() => {});
    this.scheduleStatus();
    this.deps.slot?.changed();
    return write;
  }

  private engineOf(record: PodRecord) {
    const address = podAddress(record.pod, this.model.spec.port);
    if (!address) throw new Error(`pod ${record.name} has no IP`);
    return this.deps.platform.engine(address);
  }

  private async finishStart(record: PodRecord): Promise<void> {
    const leadership = this.leadership;
    const engine = this.engineOf(record);
    try {
      if (!(await engine.healthy())) throw new Error("the engine does not answer /health");
      if (this.model.config.sleep && (await engine.isSleeping().catch(() => false)))
        await engine.wake(1, this.model.config.wakeTimeout);
      if (this.model.config.warmup) await engine.warmup(this.model.config.id, this.model.config.wakeTimeout);
    } catch (error) {
      this.guard(leadership);
      this.failed(`start of ${this.model.config.id} failed: ${(error as Error).message}`);
      record.coolUntil = this.backoffUntil;
      return;
    }
    this.guard(leadership);
    const created = Date.parse(record.pod.metadata.creationTimestamp ?? "");
    if (Number.isFinite(created)) {
      this.lastStartMs = Date.now() - created;
      this.deps.metrics.activation.observe(
        { model: this.model.config.id, from: "cold", outcome: "ready" },
        this.lastStartMs / 1000,
      );
    }
    this.succeeded();
    this.lastActive = Date.now();
    await this.setTier(record, "ready");
  }

  private async wake(record: PodRecord, level: 1 | 2): Promise<void> {
    const leadership = this.leadership;
    const started = Date.now();
    await this.setTier(record, "waking");
    const engine = this.engineOf(record);
    try {
      await engine.wake(level, this.model.config.wakeTimeout);
      if (this.model.config.warmup) await engine.warmup(this.model.config.id, this.model.config.wakeTimeout);
    } catch (error) {
      this.guard(leadership);
      const reason = `wake of ${this.model.config.id} failed: ${(error as Error).message}`;
      this.failed(reason);
      record.coolUntil = this.backoffUntil;
      const sleeping = await engine.isSleeping().catch(() => undefined);
      if (sleeping) await this.setTier(record, level === 2 ? "asleep-2" : "asleep-1");
      else await this.stopPods([record], Math.max(0, this.workloadReplicas() - 1), true);
      return;
    }
    this.guard(leadership);
    this.lastWakeMs = Date.now() - started;
    this.deps.metrics.activation.observe(
      { model: this.model.config.id, from: `asleep-${level}`, outcome: "ready" },
      this.lastWakeMs / 1000,
    );
    this.succeeded();
    this.lastActive = Date.now();
    await this.setTier(record, "ready");
  }

  /**
   * Stop routing (the activators see `draining` through their pod watch), give them a moment to
   * see it, wait until the engine has nothing running or queued (bounded by drainTimeout), then
   * sleep with mode=wait (or stop). A request that comes back before the sleep begins takes it back.
   */
  private async drainThen(record: PodRecord, next: 1 | 2 | "stop"): Promise<void> {
    const leadership = this.leadership;
    await this.setTier(record, "draining");
    const drainTimeout = this.deps.slot
      ? Math.min(this.model.config.drainTimeout, 60_000)
      : this.model.config.drainTimeout;
    const deadline = Date.now() + drainTimeout;
    await sleep(this.deps.drainGraceMs);
    const engine = this.engineOf(record);
    while (record.tier === "draining" && Date.now() < deadline) {
      this.guard(leadership);
      const load = await engine.load(1_000).catch(() => ({ running: 0, waiting: 0 }));
      if (load.running + load.waiting === 0) break;
      await sleep(100);
    }
    this.guard(leadership);
    if (record.tier !== "draining") return; // taken back by demand
    record.leaving = true;
    if (next === "stop") {
      await this.stopPods([record], Math.max(0, this.workloadReplicas() - 1), true);
      return;
    }
    try {
      await engine.sleep(next, "wait", drainTimeout + 30_000);
    } catch (error) {
      this.guard(leadership);
      this.log.warn("sleep failed; stopping the pod", { pod: record.name, error });
      await this.stopPods([record], Math.max(0, this.workloadReplicas() - 1), true);
      return;
    }
    record.leaving = false;
    await this.setTier(record, next === 1 ? "asleep-1" : "asleep-2");
  }

  /** Level 1 → 2 frees host RAM (vLLM ignores a sleep while asleep: wake, then sleep deeper). */
  private async deepen(record: PodRecord): Promise<void> {
    if (this.deps.slot) {
      // The slot's accelerator may hold another member by now: waking is not allowed; go to zero.
      await this.stopPods([record], Math.max(0, this.workloadReplicas() - 1), true);
      return;
    }
    const engine = this.engineOf(record);
    try {
      await engine.wake(1, this.model.config.wakeTimeout);
      await engine.sleep(2, "wait", 30_000);
    } catch (error) {
      this.log.warn("deeper sleep failed; stopping the pod", { pod: record.name, error });
      await this.stopPods([record], Math.max(0, this.workloadReplicas() - 1), true);
      return;
    }
    await this.setTier(record, "asleep-2");
  }

  /** Where is the engine really (after a takeover mid-operation, or when an activator could not reach it)? */
  private async recheck(record: PodRecord): Promise<void> {
    const engine = this.engineOf(record);
    if (!(await engine.healthy())) return; // the kubelet restarts it; its restart count tells us
    const sleeping = this.model.config.sleep ? await engine.isSleeping().catch(() => undefined) : false;
    if (sleeping === undefined) return;
    if (sleeping) {
      // The level is not known for sure: level 2's wake (reload the weights) is right for both.
      const level = record.tier === "draining" ? this.model.config.sleepLevel : 2;
      if (!isAsleep(record.tier) || record.tier === "asleep-1")
        await this.setTier(record, `asleep-${level}` as Tier);
      return;
    }
    if (record.tier === "waking" || record.tier === "draining") {
      if (this.model.config.warmup) await engine.warmup(this.model.config.id, this.model.config.wakeTimeout);
      await this.setTier(record, "ready");
    }
  }

  private scaleUp(to: number): void {
    const leadership = this.leadership;
    this.guard(leadership);
    const from = this.workloadReplicas();
    this.scaling = true;
    // Counted as pending pods at once, so the next pass (and the slot) sees the start under way.
    this.scaleOverride = { replicas: to, until: Date.now() + 10_000 };
    this.log.info("scaling up", { from, to });
    void this.deps.platform
      .scale(this.ref, from, to)
      .then(() => {
        this.counts.scales++;
      })
      .catch((error: unknown) => {
        this.scaleOverride = undefined;
        if (leadership === this.leadership) this.log.warn("scale-up failed; deciding again", { error });
      })
      .finally(() => {
        this.scaling = false;
        if (leadership === this.leadership) this.changed();
      });
  }

  /** Scale down, the given pods first (lowest deletion cost). */
  private async stopPods(records: PodRecord[], to: number, awaitIt = false): Promise<void> {
    const leadership = this.leadership;
    const run = async () => {
      this.scaling = true;
      for (const r of records) {
        r.busy = true;
        r.leaving = true;
      }
      const from = this.workloadReplicas();
      try {
        this.guard(leadership);
        for (const r of records) await this.deps.platform.markForRemoval(r.pod);
        this.guard(leadership);
        this.log.info("scaling down", { from, to, pods: records.map((r) => r.name) });
        this.scaleOverride = { replicas: to, until: Date.now() + 10_000 };
        await this.deps.platform.scale(this.ref, from, to);
        this.counts.scales++;
      } catch (error) {
        this.scaleOverride = undefined;
        for (const r of records) {
          r.busy = false;
          r.leaving = false;
        }
        if (!(error instanceof NotLeading)) this.log.warn("scale-down failed; deciding again", { error });
      } finally {
        this.scaling = false;
        if (leadership === this.leadership) this.changed();
      }
    };
    if (awaitIt) await run();
    else void run();
  }

  private failed(reason: string): void {
    this.failures++;
    this.lastError = reason;
    const backoff = this.failures <= 1 ? 0 : Math.min(maxBackoffMs, 1_000 * 2 ** (this.failures - 2));
    this.backoffUntil = Date.now() + backoff;
    this.log.warn("activation failed", { reason, failures: this.failures, backoffMs: backoff });
    this.deps.metrics.activation.observe({ model: this.model.config.id, from: "any", outcome: "failed" }, 0);
    this.scheduleStatus();
  }

  private succeeded(): void {
    this.failures = 0;
    this.lastError = undefined;
    this.backoffUntil = 0;
  }

  // --- status ---

  /** Writes the Model's status when it differs from what was written last (one write at a time). */
  private scheduleStatus(): void {
    if (!this.leading) return;
    this.statusDirty = true;
    if (this.statusWriting) return;
    const leadership = this.leadership;
    this.statusWriting = (async () => {
      while (this.statusDirty && leadership === this.leadership) {
        this.statusDirty = false;
        await this.writeStatus(leadership).catch((error: unknown) =>
          this.log.warn("status write failed", { error }),
        );
      }
    })().finally(() => {
      this.statusWriting = undefined;
    });
  }

  private computeStatus(resource: (ModelResource & KubeObject) | undefined) {
    return modelStatus({
      replicas: [...this.records.values()].map((r) => ({
        pod: r.name,
        tier: r.tier,
        since: r.since,
        podReady: podReady(r.pod),
      })),
      pendingPods: this.pendingPods(),
      selector: this.deps.workload()?.selector ?? "",
      generation: resource?.metadata.generation,
      lastError: this.lastError,
      lastWakeMs: this.lastWakeMs,
      lastStartMs: this.lastStartMs,
      previous: resource?.status?.conditions as Condition[] | undefined,
      now: Date.now(),
    });
  }

  /**
   * A conditional merge patch of the status subresource. On 409 the Model is read again and the
   * status computed again from it (its conditions' transition times); bounded, then left to the
   * next pass.
   */
  private async writeStatus(leadership: number): Promise<void> {
    let resource = this.deps.resource();
    if (!resource) return;
    const path = `${paths.custom(group, version, "models", this.model.namespace)}/${this.model.name}/status`;
    for (let attempt = 0; attempt < 10; attempt++) {
      this.guard(leadership);
      const status = this.computeStatus(resource);
      const json = JSON.stringify(withoutTimes(status));
      if (json === this.lastStatusJson && attempt === 0) return;
      try {
        await this.deps.client.patch(path, {
          metadata: { resourceVersion: resource.metadata.resourceVersion },
          status,
        });
        this.counts.statusWrites++;
        this.lastStatusJson = json;
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
        this.counts.statusConflicts++;
        await sleep(Math.min(1_000, 20 * 2 ** attempt) * Math.random());
        resource = await this.deps.client.get<ModelResource & KubeObject>(
          `${paths.custom(group, version, "models", this.model.namespace)}/${this.model.name}`,
        );
      }
    }
    this.statusDirty = true;
    this.log.warn("status kept conflicting; trying again on the next pass");
  }

  /** For the state endpoint and tests. */
  state() {
    const load = this.load();
    return {
      model: this.model.config.id,
      object: this.model.key,
      leading: this.leading,
      pods: [...this.records.values()].map((r) => ({ pod: r.name, tier: r.tier, busy: r.busy })),
      workloadReplicas: this.workloadReplicas(),
      ...load,
      lastError: this.lastError,
      counts: this.counts,
    };
  }
}

/** The status without transition times, to tell whether anything that matters changed. */
function withoutTimes(status: ReturnType<typeof modelStatus>) {
  return { ...status, conditions: status.conditions?.map(({ lastTransitionTime: _t, ...c }) => c) };
}
