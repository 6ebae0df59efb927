import { type Context, context, propagation } from "@opentelemetry/api";
import { systemClock } from "../../lib/clock.ts";
import { createEventSink, type EventMode, eventSourceOf } from "../../lib/cloudevents.ts";
import {
  type AdminOutcome,
  type AdminVerb,
  adminPath,
  adminTimeoutMs,
  callerHeaders,
  type DemandBody,
  demandPath,
  forwardedHeader,
  type PrewarmAsk,
  type StatsBody,
  slotsPath,
  statsPath,
} from "../../lib/control-protocol.ts";
import { ownedByRevision } from "../../lib/knative/autoscaler-class.ts";
import { knativeApiServed } from "../../lib/knative/networking-served.ts";
import { aliasClaimant, assignAliases, type LeftOutAlias } from "../../lib/kube/alias-holders.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { isConflict, isNotFound, type KubeClient, type KubeObject, paths } from "../../lib/kube/client.ts";
import { EventRecorder } from "../../lib/kube/event-recorder.ts";
import type { Informer } from "../../lib/kube/informer.ts";
import {
  defaultLeaseTiming,
  LeaseElector,
  type LeaseTiming,
  leaseName,
  slotLeaseName,
} from "../../lib/kube/lease.ts";
import { kubeInformer } from "../../lib/kube/list-watch.ts";
import { type KubeModel, modelFromResource, slotConfigFrom } from "../../lib/kube/model-config.ts";
import { revisionOrder } from "../../lib/kube/model-precedence.ts";
import type { ModelResource } from "../../lib/kube/model-resource.ts";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import { type LabelSelector, selectorString } from "../../lib/kube/selector.ts";
import type { SlotResource } from "../../lib/kube/slot-resource.ts";
import type { Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/prometheus.ts";
import type { SlotStatus } from "../../lib/slot-status.ts";
import { Autoscaler } from "../autoscaler.ts";
import type { ModelController } from "../model-controller.ts";
import type { ModelTarget } from "../model-controller-api.ts";
import { readyAndWarming } from "../model-status.ts";
import type { Slot } from "../slot.ts";
import type { News } from "../tier-events.ts";
import { InvalidModels } from "./invalid-models.ts";
import { KnativePodAutoscalers } from "./knative/pod-autoscalers.ts";
import { progressDeadlineOf } from "./knative/progress-deadline.ts";
import { LeaderSettling } from "./leader-settling.ts";
import { LoadOrder } from "./load-order.ts";
import { ModelDemand, type ModelLookup } from "./model-demand.ts";
import { modelEventsFor } from "./model-events.ts";
import { ModelStatusWriter } from "./model-status-writer.ts";
import { ensureOwnedModel } from "./owned-model.ts";
import { KubePlatform, type WorkloadView } from "./platform.ts";
import { SlotStatusWriter } from "./slot-status-writer.ts";
import {
  isAnnotated,
  managedByLabel,
  managedByValue,
  modelForWorkload,
  type Workload,
  type WorkloadKind,
} from "./workload-models.ts";

export interface KubeAutoscalerOptions {
  client: KubeClient;
  /** This replica's name in Leases (its pod name). */
  identity: string;
  /** Where other replicas reach this one (`http://host:port`), published in the Leases it holds; given to start() when only known after listening. */
  address?: string;
  /** The namespace of the Leases (the autoscaler's own). */
  leaseNamespace: string;
  /** Only Models and workloads of this namespace; all namespaces when absent. */
  namespace?: string;
  leaseTiming?: LeaseTiming;
  /** Time for activators to see a pod's `draining` before its engine is checked for idleness. */
  drainGraceMs?: number;
  /** Host RAM the level-1 sleepers of one node may hold (bytes); unlimited when absent. */
  hostMemoryBudget?: number;
  /** Where tier changes go as CloudEvents; Knative's `K_SINK` when absent; nowhere without either. */
  eventSink?: string;
  /** Binary content mode unless `structured`. */
  eventMode?: EventMode;
  informer?: { resyncMs?: number; staleMs?: number };
  log: Logger;
  registry: Registry;
}

type Model = ModelResource & KubeObject;
interface ScalableWorkload extends Workload {
  spec?: Workload["spec"] & { replicas?: number; selector?: LabelSelector; progressDeadlineSeconds?: number };
}

/** One Lease and what its holder drives: a single unslotted Model, or every member of a slot. */
interface Unit {
  key: string;
  lease: LeaseElector;
  /** Model keys (`namespace/name`). */
  models: Set<string>;
  /** Slot keys (`namespace/slot`): one slot per namespace that has a slot of this name. */
  slots: Set<string>;
}

/** What the autoscaler keeps per Model besides its controller. */
interface Entry {
  model: KubeModel;
  unitKey: string;
  status: ModelStatusWriter;
  /** The aliases it lists that another Model has (alias-holders.ts). */
  aliasesLeftOut?: LeftOutAlias[];
  /** What its status was last asked to say of its aliases: a change writes it again. */
  aliasesSaid?: string;
}

/** One writer of Models for annotated workloads, per watched scope (all namespaces, or one). */
const workloadsLease = (namespace?: string) =>
  leaseName("snooze-workloads", ...(namespace ? [namespace] : []));

/** An activator that stopped reporting for this long no longer counts. */
const activatorExpiryMs = 5_000;
/** A new leader's demand is unknown until activators report (each second), at most this long. */
const settleMs = 2_000;

/**
 * `snooze autoscaler`: the control plane on Kubernetes. The decisions are the same `Autoscaler`
 * (controllers and slots) local mode runs, over the KubePlatform; this file adds what only
 * Kubernetes has: it watches Models, Slots, pods and workloads; campaigns for one Lease per slot and
 * per unslotted Model and lets only the holder act; takes activators' demand and stats and forwards
 * those of Models another replica leads; writes Model and Slot status; and keeps Models of
 * annotated workloads in step.
 */
export class KubeAutoscaler {
  private readonly options: KubeAutoscalerOptions;
  private readonly log: Logger;
  readonly platform: KubePlatform;
  readonly core: Autoscaler;
  readonly informers: {
    models: Informer<Model>;
    slots: Informer<SlotResource & KubeObject>;
    pods: Informer<Pod>;
    deployments: Informer<ScalableWorkload>;
    statefulsets: Informer<ScalableWorkload>;
    knative?: Informer<Workload>;
  };
  /** Snooze as a Knative autoscaler class: PodAutoscalers, their SKS and their revisions' Models. */
  readonly knative: KnativePodAutoscalers;
  private readonly entries = new Map<string, Entry>();
  private readonly units = new Map<string, Unit>();
  private workloadsElector?: LeaseElector;
  private workloadSyncPending = false;
  private stopped = false;
  private left = false;
  private address?: string;
  /** Forwarded demand and stats, for tests and the state endpoint. */
  readonly counts = { forwarded: 0, dropped: 0 };
  /** Load reports from activators are applied in the order they were seen there, not as they arrive. */
  private readonly loadOrder = new LoadOrder(activatorExpiryMs);
  /** Each Model's demand for external scalers (KEDA), read here or at the Model's leader. */
  readonly modelDemand: ModelDemand;
  private readonly loadListeners = new Set<(key: string, poke: boolean) => void>();
  /** When this replica last took the lead of each Model, and when activators last reported it here. */
  private readonly settling = new LeaderSettling(settleMs);
  /** Tier changes and swaps as Kubernetes Events on the Models, beside the CloudEvents. */
  private readonly recorder: EventRecorder;
  /** Workloads whose snooze.dev annotations are not valid, with the problems last logged. */
  private readonly toldInvalidWorkloads = new Map<string, string>();
  /** Annotated workloads whose name another's Model has, told once (until that changes). */
  private readonly toldForeignWorkloads = new Set<string>();
  /** Models whose spec cannot be used: said in their status by the workloads' Lease holder. */
  private readonly invalidModels: InvalidModels;

  constructor(options: KubeAutoscalerOptions) {
    this.options = options;
    this.log = options.log;
    const ns = options.namespace;
    const common = { log: options.log, ...options.informer };
    const client = options.client;
    this.informers = {
      models: kubeInformer<Model>(client, paths.custom(group, version, "models", ns), {
        name: "models",
        ...common,
      }),
      slots: kubeInformer(client, paths.custom(group, version, "slots", ns), { name: "slots", ...common }),
      pods: kubeInformer<Pod>(client, paths.pods(ns), { name: "pods", ...common }),
      deployments: kubeInformer(client, paths.apps("deployments", ns), { name: "deployments", ...common }),
      statefulsets: kubeInformer(client, paths.apps("statefulsets", ns), { name: "statefulsets", ...common }),
    };
    this.platform = new KubePlatform({
      client,
      pods: this.informers.pods,
      workload: (model) => this.workloadOf(model),
    });
    this.recorder = new EventRecorder({
      client,
      reportingController: "snooze.dev/autoscaler",
      reportingInstance: options.identity,
      log: options.log,
      registry: options.registry,
    });
    this.core = new Autoscaler({
      platform: this.platform,
      clock: systemClock,
      log: options.log,
      registry: options.registry,
      namespaced: true,
      sink: createEventSink({
        configured: options.eventSink,
        mode: options.eventMode,
        source: eventSourceOf("snooze", "autoscaler", options.identity),
        log: options.log,
        registry: options.registry,
      }),
      news: (news) => this.mirror(news),
      hostMemoryBudget: options.hostMemoryBudget ?? Number.POSITIVE_INFINITY,
      drainGraceMs: options.drainGraceMs ?? 1_000,
      activatorExpiryMs,
    });
    this.knative = new KnativePodAutoscalers({
      client,
      namespace: ns,
      leaseNamespace: options.leaseNamespace,
      identity: options.identity,
      address: options.address,
      leaseTiming: options.leaseTiming,
      informer: options.informer,
      models: this.informers.models,
      deployments: this.informers.deployments,
      pods: this.informers.pods,
      events: this.recorder,
      // A revision's readiness is in its Model's status (RevisionReady): written when its PA changes.
      paChanged: (key) => this.entries.get(key)?.status.schedule(),
      log: options.log.child({ part: "knative" }),
    });
    this.invalidModels = new InvalidModels({
      client,
      log: options.log,
      leading: () => this.workloadsElector?.leading === true,
    });
    this.modelDemand = new ModelDemand({
      source: this,
      tokens: options.client,
      log: options.log.child({ part: "demand" }),
    });
  }

  get identity(): string {
    return this.options.identity;
  }

  /** Starts watching and campaigning; `address` is where other replicas reach this one. */
  async start(address = this.options.address): Promise<void> {
    this.address = address;
    const { models, slots, pods, deployments, statefulsets } = this.informers;
    models.on({
      add: () => this.syncModels(),
      update: (m, old) => {
        // Status writes (ours) do not change what a Model asks for: its spec (generation) and labels
        // do, and a revision's readiness (its status's RevisionReady), which moves its aliases.
        const labels = (o: Model) => JSON.stringify(o.metadata.labels ?? {});
        const ready = (o: Model) => revisionOrder(o)?.ready;
        if (
          m === old ||
          m.metadata.generation !== old.metadata.generation ||
          labels(m) !== labels(old) ||
          ready(m) !== ready(old)
        )
          this.syncModels();
      },
      delete: () => this.syncModels(),
    });
    slots.on({ add: () => this.syncSlots(), update: () => this.syncSlots(), delete: () => this.syncSlots() });
    const podChanged = (pod: Pod) => this.platform.podChanged(pod);
    pods.on({ add: podChanged, update: podChanged, delete: podChanged });
    const workloadChanged = () => {
      this.platform.workloadsChanged();
      this.scheduleWorkloadSync();
    };
    deployments.on({ add: workloadChanged, update: workloadChanged, delete: workloadChanged });
    statefulsets.on({ add: workloadChanged, update: workloadChanged, delete: workloadChanged });
    if (
      await knativeApiServed(this.options.client, { group: "serving.knative.dev", version: "v1" }, this.log)
    ) {
      this.informers.knative = kubeInformer<Workload>(
        this.options.client,
        this.options.namespace
          ? `/apis/serving.knative.dev/v1/namespaces/${this.options.namespace}/services`
          : "/apis/serving.knative.dev/v1/services",
        { name: "services.serving.knative.dev", log: this.log, ...this.options.informer },
      );
      this.informers.knative.on({ add: workloadChanged, update: workloadChanged, delete: workloadChanged });
    }
    await Promise.all([
      pods.start(),
      deployments.start(),
      statefulsets.start(),
      slots.start(),
      this.informers.knative?.start(),
    ]);
    await models.start();
    this.syncModels();
    await this.knative.start(address);
    this.workloadsElector = new LeaseElector({
      client: this.options.client,
      namespace: this.options.leaseNamespace,
      name: workloadsLease(this.options.namespace),
      identity: this.options.identity,
      address: this.address,
      timing: this.options.leaseTiming,
      log: this.log,
      onStartedLeading: () => {
        this.invalidModels.reset();
        this.syncModels();
      },
    });
    this.workloadsElector.start();
  }

  /**
   * The shutdown is coming (cli/autoscaler.ts: `--shutdown-delay`): `/readyz` says 503, so the
   * Service's endpoints let this replica go, while it still serves and acts as before.
   */
  leave(): void {
    this.left = true;
  }

  get ready(): boolean {
    return (
      !this.stopped &&
      !this.left &&
      Object.values(this.informers).every((i) => !i || i.synced) &&
      this.knative.synced
    );
  }

  /** Stops acting, releases every Lease it holds (a successor takes over at once), stops watching. */
  async stop(): Promise<void> {
    this.stopped = true;
    // The controllers stand down at once (close's first, synchronous part); the Leases are released
    // while queued CloudEvents go out, so a successor does not wait for the sink.
    await Promise.all([
      this.core.close(),
      ...[...this.units.values()].map((u) => u.lease.stop(true)),
      this.workloadsElector?.stop(true),
      this.knative.stop(),
    ]);
    await Promise.all(Object.values(this.informers).map((i) => i?.stop()));
  }

  // --- Models, units and Leases ---

  private targetOf(model: KubeModel): ModelTarget {
    return {
      key: model.key,
      config: model.config,
      desired: model.spec.replicas,
      minReplicas: model.spec.minReplicas,
      minPods: model.spec.minPods,
      maxReplicas: model.spec.maxReplicas,
      precedence: model.precedence,
    };
  }

  private syncModels(): void {
    if (this.stopped) return;
    const seen = new Set<string>();
    /** Ids whose Models came, went or changed id: which of them serves each may have changed. */
    const touched = new Set<string>();
    const invalid: { model: Model; error: string }[] = [];
    for (const resource of this.informers.models.list()) {
      const parsed = modelFromResource(resource);
      if ("error" in parsed) {
        invalid.push({ model: resource, error: parsed.error });
        continue;
      }
      seen.add(parsed.key);
      const unitKey = parsed.config.slot !== undefined ? `slot:${parsed.config.slot}` : `model:${parsed.key}`;
      const existing = this.entries.get(parsed.key);
      if (existing?.model.config.id !== parsed.config.id) {
        touched.add(parsed.config.id);
        if (existing) touched.add(existing.model.config.id);
      }
      if (existing && existing.unitKey === unitKey) {
        existing.model = parsed;
        this.platform.setModel(parsed);
        this.core.updateModel(this.targetOf(parsed));
        continue;
      }
      if (existing) this.removeModel(parsed.key);
      this.addModel(parsed, unitKey);
    }
    for (const [key, entry] of [...this.entries]) {
      if (seen.has(key)) continue;
      touched.add(entry.model.config.id);
      this.removeModel(key);
      // Its metric series go once no Model of its id is left in its namespace (they are labelled
      // by the id and the namespace).
      const { id } = entry.model.config;
      const { namespace } = entry.model;
      if (
        ![...this.entries.values()].some((o) => o.model.config.id === id && o.model.namespace === namespace)
      )
        this.core.forgetModel(id, key);
    }
    this.invalidModels.report(invalid);
    // Which Model each alias reaches, as every activator decides it: one left out says so.
    const aliases = assignAliases([...this.entries.values()].map((entry) => aliasClaimant(entry.model)));
    for (const entry of this.entries.values()) {
      const leftOut = aliases.leftOut.get(entry.model.key);
      const said = JSON.stringify([entry.model.config.aliases.length > 0, leftOut ?? []]);
      entry.aliasesLeftOut = leftOut;
      if (said === entry.aliasesSaid) continue;
      entry.aliasesSaid = said;
      entry.status.schedule();
    }
    // A Model that serves an id in another's place, or no longer, says so in its status.
    for (const entry of this.entries.values())
      if (touched.has(entry.model.config.id)) entry.status.schedule();
    this.syncSlots();
    this.scheduleWorkloadSync();
  }

  private addModel(model: KubeModel, unitKey: string): void {
    const unit = this.unit(unitKey);
    const holding = () => unit.lease.leading;
    const slotKey = model.config.slot !== undefined ? `${model.namespace}/${model.config.slot}` : undefined;
    const entry: Entry = {
      model,
      unitKey,
      status: new ModelStatusWriter({
        client: this.options.client,
        log: this.log.child({ model: model.config.id, object: model.key }),
        model: () => entry.model,
        controller: () => this.core.controllerByKey(model.key),
        resource: () => this.informers.models.get(model.key),
        selector: () => this.workloadOf(entry.model)?.selector ?? "",
        servedInstead: () => this.core.servedInstead(model.key),
        aliasesLeftOut: () => entry.aliasesLeftOut ?? [],
        revisionReady: () => this.knative.revisionReady(model.key),
        holding,
      }),
    };
    this.entries.set(model.key, entry);
    this.platform.setModel(model);
    const slotExisted = slotKey !== undefined && this.core.slots.has(slotKey);
    const controller = this.core.addModel(this.targetOf(model), {
      slot: slotKey
        ? { key: slotKey, config: slotConfigFrom(model.config.slot!, this.informers.slots.get(slotKey)) }
        : undefined,
      holding,
      statusChanged: () => entry.status.schedule(),
    });
    unit.models.add(model.key);
    if (slotKey) {
      unit.slots.add(slotKey);
      const slot = this.core.slots.get(slotKey)!;
      if (!slotExisted) this.watchSlotStatus(slotKey, slot);
      if (unit.lease.leading && !slotExisted) slot.lead();
    }
    if (unit.lease.leading) this.leadModel(controller, entry);
  }

  private leadModel(controller: ModelController, entry: Entry): void {
    entry.status.reset();
    // What the previous leader learned of this model's traffic is kept in its status.
    controller.restoreLearning(
      this.informers.models.get(entry.model.key)?.status?.learning,
      `the status of Model ${entry.model.key}`,
    );
    this.settling.led(controller.key);
    controller.lead();
  }

  private removeModel(key: string): void {
    const entry = this.entries.get(key);
    if (!entry) return;
    this.entries.delete(key);
    this.settling.forget(key);
    this.core.removeModel(key);
    this.platform.removeModel(key);
    const unit = this.units.get(entry.unitKey);
    if (!unit) return;
    unit.models.delete(key);
    for (const slotKey of [...unit.slots]) if (!this.core.slots.has(slotKey)) unit.slots.delete(slotKey);
    if (unit.models.size === 0) {
      this.units.delete(entry.unitKey);
      // A Model's Lease has no use once the Model is gone (a new Model of that name makes it again):
      // deleted, not left behind, one per Model ever made (every Knative revision). A slot's stays,
      // released: the webhooks read it, and a slot's members come and go.
      void (entry.unitKey.startsWith("model:") ? unit.lease.retire() : unit.lease.stop(true));
    }
  }

  /** The Slot object's status follows the slot; written by the holder of its Lease. */
  private watchSlotStatus(slotKey: string, slot: Slot): void {
    const writer = new SlotStatusWriter({
      client: this.options.client,
      log: this.log.child({ slot: slotKey }),
      clock: systemClock,
      namespace: slotKey.slice(0, slotKey.indexOf("/")),
      resource: () => this.informers.slots.get(slotKey),
      status: () => slot.status(),
      holding: () => slot.isLeading && this.core.slots.get(slotKey) === slot,
    });
    slot.onStatusChanged(() => writer.write());
  }

  private unit(key: string): Unit {
    let unit = this.units.get(key);
    if (unit) return unit;
    // The webhooks rely on this name for slots: snooze-slot-<slot>, holder = the autoscaler pod.
    const name = key.startsWith("slot:")
      ? slotLeaseName(key.slice("slot:".length))
      : leaseName("snooze-model", key.slice("model:".length).replace("/", "."));
    const models = new Set<string>();
    const slots = new Set<string>();
    const lease = new LeaseElector({
      client: this.options.client,
      namespace: this.options.leaseNamespace,
      name,
      identity: this.options.identity,
      address: this.address,
      timing: this.options.leaseTiming ?? defaultLeaseTiming,
      log: this.log,
      onStartedLeading: () => {
        for (const slotKey of slots) this.core.slots.get(slotKey)?.lead();
        for (const m of models) {
          const controller = this.core.controllerByKey(m);
          const entry = this.entries.get(m);
          if (controller && entry) this.leadModel(controller, entry);
        }
      },
      onStoppedLeading: () => {
        for (const m of models) this.core.controllerByKey(m)?.standDown();
        for (const slotKey of slots) this.core.slots.get(slotKey)?.standDown();
      },
    });
    unit = { key, lease, models, slots };
    this.units.set(key, unit);
    lease.start();
    return unit;
  }

  private syncSlots(): void {
    for (const [key, slot] of this.core.slots) {
      slot.config = slotConfigFrom(slot.config.name, this.informers.slots.get(key));
      slot.changed();
    }
  }

  /** News on the Models it is about, as Kubernetes Events; only by the holder of a Model's Lease. */
  private mirror(news: News): void {
    for (const event of modelEventsFor(news)) {
      const entry = this.entries.get(event.model);
      if (!entry || !this.core.controllerByKey(event.model)?.isLeading) continue;
      const uid = this.informers.models.get(event.model)?.metadata.uid;
      this.recorder.record(
        {
          apiVersion: `${group}/${version}`,
          kind: "Model",
          namespace: entry.model.namespace,
          name: entry.model.name,
          ...(uid ? { uid } : {}),
        },
        event,
      );
    }
  }

  // --- pods and workloads ---

  private workloadOf(model: KubeModel): WorkloadView | undefined {
    const { namespace, spec } = model;
    const ref = spec.workloadRef;
    if (ref.kind === "Service") {
      const service = this.informers.knative?.get(`${namespace}/${ref.name}`);
      if (!service) return undefined;
      const selector = `serving.knative.dev/service=${ref.name}`;
      const live = this.platform.podsOf(model, selector).filter((p) => !p.metadata.deletionTimestamp).length;
      return { replicas: live, selector, scalable: false };
    }
    const informer = ref.kind === "StatefulSet" ? this.informers.statefulsets : this.informers.deployments;
    const workload = informer.get(`${namespace}/${ref.name}`);
    if (!workload) return undefined;
    // A Snooze-class revision's Deployment (its Model is named as the revision) before the
    // revision reached its initial scale: a pod that cannot start is kept (docs/knative.md), until
    // startTimeout or, sooner, past the revision's progress deadline (from this Deployment).
    const keep = ref.kind === "Deployment" && this.knative.initializing(namespace, model.name, ref.name);
    const deadline = keep ? progressDeadlineOf(workload) : undefined;
    return {
      replicas: workload.spec?.replicas ?? 1,
      selector: selectorString(workload.spec?.selector),
      scalable: true,
      ...(keep ? { keepFailedStarts: true } : {}),
      ...(deadline !== undefined ? { progressDeadline: deadline } : {}),
    };
  }

  // --- demand, stats and admin actions from activators ---

  /** Demand for `model`: acted on here when this replica leads it, else forwarded to the leader. */
  demand(body: DemandBody, forwarded: boolean): void {
    // A load older than one taken already (the posts race) is left out; the demand itself counts.
    const load =
      body.inFlight !== undefined &&
      body.held !== undefined &&
      this.loadOrder.fresh(body.activator, body.model, body.seq, performance.now())
        ? {
            inFlight: body.inFlight,
            held: body.held,
            oldestHeldMs: body.oldestHeldMs,
            ...(body.pinnedTo ? { pinnedTo: body.pinnedTo } : {}),
          }
        : undefined;
    if (this.core.demand(body.activator, body.model, body.unreachable, undefined, load)) {
      this.loadChanged(body.model, true);
      return;
    }
    const controller = this.core.controller(body.model);
    if (!controller) return;
    if (!forwarded) this.forward(controller, demandPath, body);
    else this.counts.dropped++;
  }

  stats(body: StatsBody, forwarded: boolean): void {
    const byLeader = new Map<string, StatsBody["models"]>();
    for (const entry of body.models) {
      if (!this.loadOrder.fresh(body.activator, entry.model, entry.seq, performance.now())) continue;
      const flow =
        entry.arrived !== undefined && entry.completed !== undefined && entry.serviceMs !== undefined
          ? { arrived: entry.arrived, completed: entry.completed, serviceMs: entry.serviceMs }
          : undefined;
      const { model, inFlight, held, oldestHeldMs, routed, pinnedTo } = entry;
      const load = { inFlight, held, oldestHeldMs, flow, routed, pinnedTo };
      if (this.core.stats(body.activator, model, load)) {
        this.loadChanged(entry.model, false);
        continue;
      }
      const controller = this.core.controller(entry.model);
      if (!controller) continue;
      if (forwarded) {
        this.counts.dropped++;
        continue;
      }
      // One request per leader.
      const address = this.leaderAddress(controller);
      if (address) byLeader.set(address, [...(byLeader.get(address) ?? []), entry]);
    }
    for (const [address, models] of byLeader)
      this.post(address, statsPath, { activator: body.activator, models });
  }

  /**
   * A person's wake, sleep or stop of a model (through an activator's admin API): carried out here
   * when this replica leads the model, else passed to the leader. Resolves when it is done.
   */
  async admin(
    model: string,
    verb: AdminVerb,
    forwarded: boolean,
    prewarm?: PrewarmAsk,
    caller?: Context,
  ): Promise<AdminOutcome> {
    const controller = this.core.controller(model);
    if (!controller) return { status: 404, message: `no Model serves ${model}` };
    if (verb === "prewarm" && !prewarm)
      return { status: 400, message: "a prewarm needs forMs: how long to stay awake" };
    if (controller.isLeading) {
      if (verb === "prewarm") {
        const { keptMs } = await controller.prewarm(prewarm!.forMs, undefined, {
          hint: prewarm!.hint,
          caller,
        });
        return {
          status: 200,
          message: `prewarm: kept awake for ${keptMs} ms`,
          tier: controller.tier,
          keptMs,
        };
      }
      if (verb === "wake") await controller.wakeNow(undefined, caller);
      else {
        const outcome = await (verb === "sleep" ? controller.sleepNow() : controller.stopNow());
        if (outcome === "stopped-instead")
          return {
            status: 502,
            message: controller.sleepFailed() ?? "the engine's sleep failed",
            tier: controller.tier,
            stoppedInstead: true,
          };
        if (outcome !== "done")
          return {
            status: 504,
            message: `${verb}: ${outcome}`,
            tier: controller.tier,
            takenBack: outcome === "taken-back",
          };
      }
      return { status: 200, message: `${verb}: done`, tier: controller.tier };
    }
    const address = this.leaderAddress(controller);
    if (forwarded || !address)
      return { status: 503, message: `no autoscaler leads ${model} right now; retry` };
    // The caller's trace goes on to the leader, as a forwarded demand's does.
    const trace: Record<string, string> = {};
    if (caller) propagation.inject(caller, trace);
    const response = await fetch(`${address}${adminPath(model, verb, prewarm)}`, {
      method: "POST",
      headers: await callerHeaders(this.options.client, {
        ...trace,
        [forwardedHeader]: this.options.identity,
      }),
      signal: AbortSignal.timeout(adminTimeoutMs),
    });
    return (await response.json()) as AdminOutcome;
  }

  /** The slots this replica leads, and (unless asked by another replica) those the others lead. */
  async slotStatuses(forwarded: boolean): Promise<SlotStatus[]> {
    const own = [...this.core.slots.entries()]
      .filter(([key]) => [...this.units.values()].some((u) => u.slots.has(key) && u.lease.leading))
      .map(([, slot]) => slot.status());
    if (forwarded) return own;
    const others = new Set<string>();
    for (const unit of this.units.values()) {
      const holder = unit.lease.holder;
      if (unit.slots.size > 0 && holder?.address && holder.identity !== this.options.identity)
        others.add(holder.address);
    }
    const theirs = await Promise.all(
      [...others].map((address) =>
        callerHeaders(this.options.client, { [forwardedHeader]: this.options.identity })
          .then((headers) => fetch(`${address}${slotsPath}`, { headers, signal: AbortSignal.timeout(2_000) }))
          .then((r) => r.json() as Promise<{ slots: SlotStatus[] }>)
          .then((body) => body.slots)
          .catch(() => [] as SlotStatus[]),
      ),
    );
    return [...own, ...theirs.flat()];
  }

  // --- demand for external scalers (model-demand.ts, external-scaler.ts) ---

  /** The Model `namespace/name`: its load when this replica leads it, else where its leader is. */
  lookup(key: string): ModelLookup | undefined {
    const controller = this.entries.has(key) ? this.core.controllerByKey(key) : undefined;
    if (!controller) return undefined;
    if (controller.isLeading) {
      // A new leader knows no load until the activators' next stats (every second): until then, or
      // settleMs without any, it says it is settling rather than report a demand of 0.
      const settling = this.settling.settling(key);
      const entry = this.entries.get(key);
      return {
        leading: true,
        load: controller.load(),
        reports: controller.flowReports(),
        ...readyAndWarming(controller.observation()),
        concurrency: entry?.model.config.concurrency,
        startMs: controller.startEstimateMs(),
        desired: entry?.model.spec.replicas,
        settling,
      };
    }
    return { leading: false, leader: this.leaderAddress(controller) };
  }

  /** Load reported for a Model this replica leads; `poke`: an activator just held a request. */
  onLoad(listener: (key: string, poke: boolean) => void): () => void {
    this.loadListeners.add(listener);
    return () => this.loadListeners.delete(listener);
  }

  /** Demand one awake replica of the Model is meant for: its `concurrency` when set, else 1. */
  perReplica(key: string): number | undefined {
    const entry = this.entries.get(key);
    if (!entry) return undefined;
    const concurrency = entry.model.config.concurrency;
    return concurrency !== undefined && concurrency > 0 ? concurrency : 1;
  }

  private loadChanged(id: string, poke: boolean): void {
    const key = this.core.controller(id)?.key;
    if (key === undefined) return;
    // Only stats carry an activator's whole load; a demand poke says one request is held.
    if (!poke) this.settling.reported(key);
    for (const listener of this.loadListeners) listener(key, poke);
  }

  private leaderAddress(controller: ModelController): string | undefined {
    const unit = this.units.get(this.entries.get(controller.key)?.unitKey ?? "");
    const holder = unit?.lease.holder;
    if (!holder?.address || holder.identity === this.options.identity) return undefined;
    return holder.address;
  }

  private forward(controller: ModelController, path: string, body: unknown): void {
    const address = this.leaderAddress(controller);
    if (!address) {
      // No leader known yet: the activator's next stats (every second) carry the demand again.
      this.counts.dropped++;
      return;
    }
    this.post(address, path, body);
  }

  private post(address: string, path: string, body: unknown): void {
    this.counts.forwarded++;
    // The caller's trace context goes on (a demand is acted on inside the held request's), so the
    // activation on the holder joins the activator's trace as it would had the demand come there.
    const trace: Record<string, string> = {};
    propagation.inject(context.active(), trace);
    // With this replica's own ServiceAccount token: the leader authenticates every caller.
    void callerHeaders(this.options.client, {
      ...trace,
      "content-type": "application/json",
      [forwardedHeader]: this.options.identity,
    })
      .then((headers) =>
        fetch(`${address}${path}`, {
          method: "POST",
          headers,
          body: JSON.stringify(body),
          signal: AbortSignal.timeout(2_000),
        }),
      )
      .then((response) => response.body?.cancel())
      .catch((error: unknown) => this.log.debug("forward failed", { address, error }));
  }

  // --- Models of annotated workloads ---

  private scheduleWorkloadSync(): void {
    if (!this.workloadsElector?.leading || this.workloadSyncPending || this.stopped) return;
    this.workloadSyncPending = true;
    setTimeout(() => {
      this.workloadSyncPending = false;
      void this.syncWorkloadModels().catch((error: unknown) =>
        this.log.warn("syncing Models of annotated workloads failed", { error }),
      );
    }, 50).unref();
  }

  /**
   * Every annotated Deployment or Knative Service has its Model, saying what its annotations say;
   * a Model the autoscaler made goes when its workload loses the annotations. A changed Model is
   * replaced (deleted, then created): the autoscaler may create and delete Models, never edit one.
   */
  private async syncWorkloadModels(): Promise<void> {
    const client = this.options.client;
    const workloads: { workload: Workload; kind: WorkloadKind }[] = [
      // A revision's Deployment carries the revision's snooze.dev annotations too: its Model is the
      // Knative class's (knative/pod-autoscalers.ts). A Knative Service without the class is Knative's.
      ...this.informers.deployments
        .list()
        .filter((workload) => !ownedByRevision(workload.metadata.ownerReferences))
        .map((workload) => ({ workload, kind: "Deployment" as const })),
      // The workload webhook gates an annotated StatefulSet's pods on snooze.dev/awake as a
      // Deployment's: without a Model, nothing set it, and its pods were never Ready.
      ...this.informers.statefulsets.list().map((workload) => ({ workload, kind: "StatefulSet" as const })),
    ];
    const wanted = new Set<string>();
    const invalid = new Set<string>();
    const foreign = new Set<string>();
    for (const { workload, kind } of workloads) {
      if (workload.metadata.deletionTimestamp) continue;
      const result = modelForWorkload(workload, kind);
      if (!result) continue;
      const key = `${workload.metadata.namespace}/${workload.metadata.name}`;
      if (result.problems) {
        invalid.add(key);
        // Said once per workload and problems: this sync follows every change of every workload.
        if (this.toldInvalidWorkloads.get(key) !== JSON.stringify(result.problems)) {
          this.log.warn("a workload's snooze.dev annotations are not valid; no Model", {
            workload: key,
            kind,
            problems: result.problems,
          });
          // Where its author looks (`kubectl describe deployment`), not only in this log.
          const kept = this.informers.models.get(key)?.metadata.labels?.[managedByLabel] === managedByValue;
          this.tellWorkload(workload, kind, {
            reason: "InvalidSettings",
            note: `Snooze ${kept ? "keeps the Model made from its last valid annotations and does not change it" : "makes no Model for it"}: ${result.problems.join("; ")}. Fix the snooze.dev annotations.`,
          });
        }
        this.toldInvalidWorkloads.set(key, JSON.stringify(result.problems));
        continue;
      }
      wanted.add(key);
      const owner = { kind, name: workload.metadata.name };
      const done = await ensureOwnedModel(client, this.informers.models.get(key), result.model, owner);
      if (done === "foreign" && !this.toldForeignWorkloads.has(key)) {
        this.log.info("a Model of the workload's name exists and is not the autoscaler's; leaving it", {
          workload: key,
        });
        this.tellWorkload(workload, kind, {
          reason: "ModelNameTaken",
          note: `A Model named "${workload.metadata.name}" exists that Snooze did not make for this ${kind}: Snooze leaves it as it is, and these snooze.dev annotations make no Model and change nothing. Put the settings in that Model's spec, or delete it to have Snooze make one from the annotations.`,
        });
      }
      if (done === "foreign") foreign.add(key);
      if (done === "replaced")
        this.log.info("replacing the Model of a workload whose annotations changed", { workload: key });
      if (done === "created" || done === "replaced")
        this.log.info("created a Model for an annotated workload", { workload: key, kind });
    }
    for (const key of [...this.toldInvalidWorkloads.keys()])
      if (!invalid.has(key)) this.toldInvalidWorkloads.delete(key);
    for (const key of [...this.toldForeignWorkloads])
      if (!foreign.has(key)) this.toldForeignWorkloads.delete(key);
    for (const key of foreign) this.toldForeignWorkloads.add(key);
    for (const model of this.informers.models.list()) {
      const key = `${model.metadata.namespace}/${model.metadata.name}`;
      if (wanted.has(key) || model.metadata.labels?.[managedByLabel] !== managedByValue) continue;
      const owner = model.metadata.ownerReferences?.[0];
      // A Model made for a Knative Service (before the autoscaler class) goes: the class makes one
      // per revision. A PodAutoscaler's Model is the Knative class's to delete.
      if (owner?.kind === "PodAutoscaler") continue;
      const workload =
        owner?.kind === "Deployment"
          ? this.informers.deployments.get(key)
          : owner?.kind === "StatefulSet"
            ? this.informers.statefulsets.get(key)
            : undefined;
      if (workload && isAnnotated(workload)) continue; // annotated but invalid: keep the last good Model
      await client
        .delete(
          `${paths.custom(group, version, "models", model.metadata.namespace)}/${model.metadata.name}`,
          {
            preconditions: { uid: model.metadata.uid },
          },
        )
        .then(
          () =>
            this.log.info("deleted the Model of a workload without snooze.dev annotations", { model: key }),
          (error: unknown) => {
            if (!isNotFound(error) && !isConflict(error)) throw error;
          },
        );
    }
  }

  /** A Warning Event on an annotated workload whose annotations make no Model (or not a new one). */
  private tellWorkload(
    workload: Workload,
    kind: WorkloadKind,
    event: { reason: string; note: string },
  ): void {
    this.recorder.record(
      {
        apiVersion: kind === "Service" ? "serving.knative.dev/v1" : "apps/v1",
        kind,
        namespace: workload.metadata.namespace ?? "default",
        name: workload.metadata.name,
        ...(workload.metadata.uid ? { uid: workload.metadata.uid } : {}),
      },
      { type: "Warning", action: "CreateModel", ...event },
    );
  }

  state() {
    return {
      identity: this.options.identity,
      ready: this.ready,
      units: [...this.units.values()].map((u) => ({
        key: u.key,
        lease: u.lease.name,
        leading: u.lease.leading,
        holder: u.lease.holder?.identity,
        models: [...u.models],
        slots: [...u.slots].map((key) => {
          const status = this.core.slots.get(key)?.status();
          return { slot: key, ...status, swapCount: status?.swaps ?? 0 };
        }),
      })),
      models: [...this.entries.values()].map((entry) => {
        const state = this.core.controllerByKey(entry.model.key)?.state();
        return {
          model: entry.model.config.id,
          object: entry.model.key,
          ...state,
          pods: state?.replicas.map((r) => ({ pod: r.id, tier: r.tier, busy: r.busy })) ?? [],
          counts: { ...state?.counts, ...entry.status.counts },
        };
      }),
      counts: this.counts,
      knative: this.knative.state(),
      informers: Object.fromEntries(
        Object.entries(this.informers)
          .filter(([, i]) => i)
          .map(([name, i]) => [name, i!.counts]),
      ),
    };
  }
}
