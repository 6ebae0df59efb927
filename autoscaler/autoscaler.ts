import { type Context, context } from "@opentelemetry/api";
import type { Clock } from "../lib/clock.ts";
import type { EventSink } from "../lib/cloudevents.ts";
import type { DemandLoad, LoadReport } from "../lib/control-plane.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/prometheus.ts";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import type { SlotConfig } from "../lib/settings/index.ts";
import { demotionsForBudget } from "./host-memory.ts";
import { learningMetrics } from "./learning-metrics.ts";
import type { LearningStore } from "./learning-store.ts";
import { autoscalerMetrics } from "./metrics.ts";
import { ModelController } from "./model-controller.ts";
import type { ModelState, ModelTarget } from "./model-controller-api.ts";
import type { Platform } from "./platform.ts";
import { Slot, type SlotMetrics, type SlotStatus, slotMetrics } from "./slot.ts";
import { type News, swapCloudEvent, TierEvents } from "./tier-events.ts";

/** How long queued CloudEvents may take to go out at shutdown. */
const sinkDrainMs = 2_000;

export interface AutoscalerOptions {
  platform: Platform;
  clock: Clock;
  log: Logger;
  registry: Registry;
  /** Where tier changes and swaps go as CloudEvents, if anywhere. */
  sink?: EventSink;
  /** The same news, with the models it is about (Kubernetes mirrors it as Events on the Models). */
  news?(news: News): void;
  /** Host RAM the level-1 sleepers of one machine may hold (bytes; Infinity: no limit). */
  hostMemoryBudget: number;
  /** Time for activators to see `draining` before an engine is checked for idleness. */
  drainGraceMs: number;
  /** How often ready engines are rechecked (ModelControllerDeps). */
  selfHealIntervalMs?: number;
  /** An activator that stopped reporting for this long no longer counts. */
  activatorExpiryMs: number;
  /** Where what the models learned is kept across restarts (local mode's state file). */
  learningStore?: LearningStore;
  /**
   * Models are Kubernetes Models (keys `namespace/name`): per-model metrics carry a `namespace`
   * label, so Models of one id in two namespaces have their own series (model-scope.ts).
   */
  namespaced?: boolean;
}

/** How often what the models learned is written to the learning store. */
const learningSaveMs = 5 * 60_000;

/** How a model joins: its slot (if any) and whether its writer may act now. */
export interface Membership {
  /** The slot's key (its name locally, `namespace/name` on Kubernetes) and settings. */
  slot?: { key: string; config: SlotConfig };
  /** Whether the holder of this model's (or its slot's) Lease may act now; always true locally. */
  holding(): boolean;
  /** The model's status changed (Kubernetes writes it to the Model). */
  statusChanged?(): void;
}

/**
 * The control plane, the same on both platforms: a controller per model over one platform, a slot
 * per shared accelerator, the host-memory budget of each machine, replica events to watchers and
 * CloudEvents to a sink. Local mode adds every model of snooze.yaml once; on Kubernetes, Models come
 * and go with their objects and lead or stand down with their Leases.
 */
export class Autoscaler {
  private readonly options: AutoscalerOptions;
  /** Where CloudEvents go: the options' sink, until a reload sets another. */
  private sink?: EventSink;
  private readonly metrics: ReturnType<typeof autoscalerMetrics>;
  private readonly slotMetricSet: SlotMetrics;
  private readonly byKey = new Map<string, ModelController>();
  private readonly byId = new Map<string, ModelController>();
  readonly slots = new Map<string, Slot>();
  private readonly slotOf = new Map<string, string>();
  /** Per slot key, the models moving into it whose engines have not left their old place (`arriving`). */
  private readonly arrivals = new Map<string, Set<string>>();
  private readonly listeners = new Set<(event: ReplicaEvent) => void>();
  private readonly tierEvents: TierEvents;
  private readonly learningMetricSet: ReturnType<typeof learningMetrics>;
  private saveTimer?: { cancel(): void };

  constructor(options: AutoscalerOptions) {
    this.options = options;
    this.sink = options.sink;
    this.tierEvents = new TierEvents(() => options.clock.now());
    // Each id by the model that serves it (two Models of one id: the one its requests go to); on
    // Kubernetes each namespace's Model of the id, in that namespace's series (the one that serves
    // it first, then the first one added there).
    const namespaced = options.namespaced === true;
    this.metrics = autoscalerMetrics(
      options.registry,
      () => {
        const shown = new Map<string, ModelController>();
        for (const controller of [...this.byId.values(), ...this.byKey.values()]) {
          const scope = namespaced ? `${controller.key.slice(0, controller.key.indexOf("/"))} ` : "";
          if (!shown.has(scope + controller.id)) shown.set(scope + controller.id, controller);
        }
        return [...shown.values()].filter((controller) => controller.isLeading);
      },
      { namespaced },
    );
    this.slotMetricSet = slotMetrics(options.registry);
    this.learningMetricSet = learningMetrics(
      options.registry,
      {
        models: () => {
          for (const controller of this.byKey.values()) controller.accrue();
        },
        slots: () => {
          const now = options.clock.now();
          for (const slot of this.slots.values()) slot.gpu.accrue(now);
        },
      },
      { namespaced },
    );
    options.platform.onChange((key, departure) => this.byKey.get(key)?.platformChanged(departure));
    if (options.learningStore) this.armLearningSave();
  }

  /** Adds a model (not yet leading: call `lead()` on it, or on its slot's unit, when it may act). */
  addModel(target: ModelTarget, membership: Membership): ModelController {
    const slot = membership.slot
      ? this.slotFor(membership.slot.key, membership.slot.config, membership)
      : undefined;
    const controller = new ModelController(target, {
      platform: this.options.platform,
      clock: this.options.clock,
      log: this.options.log,
      metrics: this.metrics.of(target.key),
      emit: (event) => this.publish(event, target.key),
      holding: membership.holding,
      drainGraceMs: this.options.drainGraceMs,
      selfHealIntervalMs: this.options.selfHealIntervalMs,
      activatorExpiryMs: this.options.activatorExpiryMs,
      slot,
      statusChanged: membership.statusChanged,
      levelOneChanged: () => this.enforceHostMemory(),
      learning: this.learningMetricSet.of(target.key),
    });
    const store = this.options.learningStore;
    if (store) controller.restoreLearning(store.load(target.key), store.source);
    this.byKey.set(target.key, controller);
    this.index(controller);
    if (slot && membership.slot) {
      slot.add(controller);
      this.slotOf.set(target.key, membership.slot.key);
    }
    return controller;
  }

  /** Removes a model: it stops acting; its replicas stay as they are (the platform owns them). */
  removeModel(key: string): void {
    const controller = this.byKey.get(key);
    if (!controller) return;
    controller.close();
    this.byKey.delete(key);
    if (this.byId.get(controller.id) === controller) {
      this.byId.delete(controller.id);
      for (const other of this.byKey.values()) if (other.id === controller.id) this.index(other);
    }
    for (const [slotKey, keys] of this.arrivals) {
      keys.delete(key);
      if (keys.size === 0) this.arrivals.delete(slotKey);
    }
    const slotKey = this.slotOf.get(key);
    this.slotOf.delete(key);
    const slot = slotKey ? this.slots.get(slotKey) : undefined;
    if (slot && slotKey) {
      slot.remove(key);
      if (slot.members.size === 0) {
        slot.standDown();
        slot.forgetSeries();
        this.slots.delete(slotKey);
      }
    }
  }

  /**
   * A model gone for good, after `removeModel` (a reload removed it, its Model was deleted; not a
   * move to another slot): its metric series go, as they can no longer grow. `key`: on Kubernetes,
   * the Model's, whose namespace's series go (others of its id keep theirs).
   */
  forgetModel(id: string, key?: string): void {
    this.metrics.forget(id, key);
    this.learningMetricSet.forgetModel(id, key);
  }

  /** New settings or desired count for a model already added. */
  updateModel(target: ModelTarget): void {
    const controller = this.byKey.get(target.key);
    if (!controller) return;
    const idBefore = controller.id;
    const hostMemoryBefore = controller.config.hostMemory;
    controller.update(target);
    if (idBefore !== controller.id) {
      if (this.byId.get(idBefore) === controller) this.byId.delete(idBefore);
      this.index(controller);
    }
    // Its level-1 sleepers now count at their new size (found by a probe: a reload that raised it
    // left the budget overrun until some model next fell asleep or woke).
    if (controller.config.hostMemory !== hostMemoryBefore) this.enforceHostMemory();
  }

  /**
   * Model `key` moves into slot `slotKey` (a reload), but its engines drain and stop where they
   * were first (removed, it then joins). They run on the accelerator the slot now names: until
   * `removeModel`, no member of the slot is started or woken beside them. Found by a probe: two
   * awake models moved into one slot, the first whose engine stopped was started there while the
   * other's engine still drained a stream.
   */
  arriving(slotKey: string, key: string): void {
    if (!this.byKey.has(key)) return;
    this.arrivals.set(slotKey, new Set(this.arrivals.get(slotKey)).add(key));
    this.slots.get(slotKey)?.changed();
  }

  /** New settings for a slot already there (its members stay); the arbiter decides again. */
  updateSlot(key: string, config: SlotConfig): void {
    const slot = this.slots.get(key);
    if (!slot) return;
    slot.config = config;
    slot.changed();
  }

  /** A new host-memory budget for the level-1 sleepers; checked at once. */
  /**
   * Events from now on go to `sink` (a reload's new `eventSink` or `eventMode`); those queued for
   * the one before still get their short moment to go out, then it closes.
   */
  setSink(sink: EventSink | undefined): void {
    const before = this.sink;
    this.sink = sink;
    void before
      ?.drain?.(sinkDrainMs)
      .then(() =>
        before.close?.(
          `the settings named another sink, and this one did not take them within the ${sinkDrainMs / 1000} s it was given`,
        ),
      )
      .catch(() => {});
  }

  setHostMemoryBudget(bytes: number): void {
    this.options.hostMemoryBudget = bytes;
    this.enforceHostMemory();
  }

  private index(controller: ModelController): void {
    const owner = this.byId.get(controller.id);
    if (!owner || owner === controller) {
      this.byId.set(controller.id, controller);
      return;
    }
    // The one that precedes serves the id (the oldest Model, as every activator decides too);
    // without precedences, the first one added.
    const first = precedes(controller, owner) ? controller : owner;
    const other = first === controller ? owner : controller;
    this.options.log.warn("two models serve the same model id; the oldest one gets its requests", {
      id: controller.id,
      serving: first.key,
      ignored: other.key,
    });
    this.byId.set(controller.id, first);
  }

  /** The key of the model that serves `key`'s id in its place, when another does. */
  servedInstead(key: string): string | undefined {
    const controller = this.byKey.get(key);
    const owner = controller && this.byId.get(controller.id);
    return owner && owner !== controller ? owner.key : undefined;
  }

  private slotFor(key: string, config: SlotConfig, membership: Membership): Slot {
    let slot = this.slots.get(key);
    if (!slot) {
      slot = new Slot(
        config,
        {
          clock: this.options.clock,
          log: this.options.log,
          metrics: this.slotMetricSet,
          holding: membership.holding,
          learning: this.learningMetricSet,
          arriving: () =>
            [...(this.arrivals.get(key) ?? [])].flatMap((model) => {
              const controller = this.byKey.get(model);
              return controller ? [{ model, tier: controller.tier }] : [];
            }),
          swapped: (swap) =>
            this.announce({
              ...swapCloudEvent({
                ...swap,
                slot: config.name,
                from: this.byKey.get(swap.from)?.id ?? swap.from,
                to: this.byKey.get(swap.to)?.id ?? swap.to,
              }),
              models: [swap.to, swap.from],
            }),
        },
        key,
      );
      this.slots.set(key, slot);
    }
    return slot;
  }

  /** The controller serving an OpenAI model id. */
  controller(id: string): ModelController | undefined {
    return this.byId.get(id);
  }

  controllerByKey(key: string): ModelController | undefined {
    return this.byKey.get(key);
  }

  get controllers(): IterableIterator<ModelController> {
    return this.byKey.values();
  }

  // --- the data plane's seam ---

  demand(activator: string, id: string, unreachable?: string, caller?: Context, load?: DemandLoad): boolean {
    const controller = this.byId.get(id);
    if (!controller?.isLeading) return false;
    controller.demand(activator, unreachable, caller ?? context.active(), load);
    return true;
  }

  stats(activator: string, id: string, load: LoadReport): boolean {
    const controller = this.byId.get(id);
    if (!controller?.isLeading) return false;
    controller.stats(activator, load);
    return true;
  }

  /** Replica events, starting with the current state of every known replica. Returns unsubscribe. */
  watch(listener: (event: ReplicaEvent) => void): () => void {
    this.listeners.add(listener);
    for (const controller of this.byKey.values()) for (const event of controller.events()) listener(event);
    return () => this.listeners.delete(listener);
  }

  states(): ModelState[] {
    return [...this.byKey.values()].map((c) => c.state());
  }

  slotStatuses(): SlotStatus[] {
    return [...this.slots.values()].map((s) => s.status());
  }

  /**
   * Stops acting; the platform's replicas stay, unless `enginesStop` says the platform stops them
   * next (local mode's shutdown): then each is reported cold first. Events already queued for the
   * sink get a short moment to go out.
   */
  async close(options: { enginesStop?: boolean } = {}): Promise<void> {
    this.saveTimer?.cancel();
    this.saveLearning();
    for (const slot of this.slots.values()) slot.standDown();
    for (const controller of this.byKey.values()) controller.close(options.enginesStop);
    await this.sink?.drain?.(sinkDrainMs);
    await this.sink?.close?.(
      `Snooze is stopping, and the sink did not take them within the ${sinkDrainMs / 1000} s the shutdown gives it`,
    );
  }

  /** Writes what every model learned to the learning store, if there is one. */
  saveLearning(): void {
    const store = this.options.learningStore;
    if (!store) return;
    const snapshots = new Map([...this.byKey].map(([key, c]) => [key, c.learningSnapshot(true)] as const));
    try {
      store.save(snapshots);
    } catch (error) {
      this.options.log.warn("could not keep what the models learned", { to: store.source, error });
    }
  }

  private armLearningSave(): void {
    this.saveTimer = this.options.clock.setTimeout(() => {
      this.saveLearning();
      this.armLearningSave();
    }, learningSaveMs);
  }

  private publish(event: ReplicaEvent, key: string): void {
    for (const listener of this.listeners) listener(event);
    const news = this.tierEvents.next(event);
    if (news) this.announce({ ...news, models: [key] });
  }

  /** The one place news leaves the control plane: as a CloudEvent, and to the news listener. */
  private announce(news: News): void {
    this.sink?.emit(news.type, news.subject, news.data, {
      traceparent: news.traceparent,
      tracestate: news.tracestate,
    });
    this.options.news?.(news);
  }

  /** Past a machine's budget, its longest-asleep level-1 sleepers go to level 2. */
  private enforceHostMemory(): void {
    const budget = this.options.hostMemoryBudget;
    if (!Number.isFinite(budget)) return;
    const byNode = new Map<string, { model: string; bytes: number; since: number }[]>();
    const owner = new Map<string, { controller: ModelController; replica: string }>();
    for (const controller of this.byKey.values()) {
      for (const sleeper of controller.levelOneSleepers()) {
        const id = `${controller.key}\u0000${sleeper.replica}`;
        owner.set(id, { controller, replica: sleeper.replica });
        byNode.set(sleeper.node, [
          ...(byNode.get(sleeper.node) ?? []),
          { model: id, bytes: sleeper.bytes, since: sleeper.since },
        ]);
      }
    }
    for (const sleepers of byNode.values())
      for (const id of demotionsForBudget(sleepers, budget)) {
        const o = owner.get(id)!;
        o.controller.demote(o.replica);
      }
  }
}

/** Whether `a` serves an id before `b` (both have precedences and `a`'s is lower). */
function precedes(a: ModelController, b: ModelController): boolean {
  return a.precedence !== undefined && b.precedence !== undefined && a.precedence < b.precedence;
}
