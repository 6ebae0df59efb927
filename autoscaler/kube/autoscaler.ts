import type { Registry } from "prom-client";
import {
  type DemandBody,
  demandPath,
  forwardedHeader,
  type StatsBody,
  statsPath,
} from "../lib/control-protocol.ts";
import { group, version } from "../lib/kube/api-group.ts";
import { isConflict, isNotFound, type KubeClient, type KubeObject, paths } from "../lib/kube/client.ts";
import type { Informer } from "../lib/kube/informer.ts";
import { defaultLeaseTiming, LeaseElector, type LeaseTiming, leaseName } from "../lib/kube/lease.ts";
import { kubeInformer } from "../lib/kube/list-watch.ts";
import { type KubeModel, modelFromResource, slotConfigFrom } from "../lib/kube/model-config.ts";
import type { ModelResource } from "../lib/kube/model-resource.ts";
import type { Pod } from "../lib/kube/pod-replica.ts";
import { type LabelSelector, selectorMatcher, selectorString } from "../lib/kube/selector.ts";
import type { SlotResource } from "../lib/kube/slot-resource.ts";
import type { Logger } from "../lib/log.ts";
import { KubeModelController } from "./kube-model-controller.ts";
import { KubePlatform } from "./kube-platform.ts";
import { KubeSlot } from "./kube-slot.ts";
import { autoscalerMetrics } from "./metrics.ts";
import {
  isAnnotated,
  managedByLabel,
  managedByValue,
  modelForWorkload,
  ownedBy,
  sameSpec,
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
  informer?: { resyncMs?: number; staleMs?: number };
  log: Logger;
  registry: Registry;
}

type Model = ModelResource & KubeObject;
interface ScalableWorkload extends Workload {
  spec?: Workload["spec"] & { replicas?: number; selector?: LabelSelector };
}

/** One Lease and what its holder drives: a single unslotted Model, or every member of a slot. */
interface Unit {
  key: string;
  lease: LeaseElector;
  models: Set<string>;
  /** Slot units: one KubeSlot per namespace that has a slot of this name. */
  slots: Map<string, KubeSlot>;
}

/** One writer of Models for annotated workloads, per watched scope (all namespaces, or one). */
const workloadsLease = (namespace?: string) =>
  leaseName("snooze-workloads", ...(namespace ? [namespace] : []));

/**
 * `snooze autoscaler`: the control plane on Kubernetes. It watches Models, Slots, pods and
 * workloads; campaigns for one Lease per slot and per unslotted Model; drives the Models of the
 * Leases it holds (KubeModelController, KubeSlot); takes activators' demand and stats and forwards
 * those of Models another replica leads; and keeps Models of annotated workloads in step.
 */
export class KubeAutoscaler {
  private readonly options: KubeAutoscalerOptions;
  private readonly log: Logger;
  private readonly platform: KubePlatform;
  private readonly metrics: ReturnType<typeof autoscalerMetrics>;
  readonly informers: {
    models: Informer<Model>;
    slots: Informer<SlotResource & KubeObject>;
    pods: Informer<Pod>;
    deployments: Informer<ScalableWorkload>;
    statefulsets: Informer<ScalableWorkload>;
    knative?: Informer<Workload>;
  };
  readonly controllers = new Map<string, KubeModelController>();
  private readonly units = new Map<string, Unit>();
  private readonly unitOf = new Map<string, string>();
  private readonly byId = new Map<string, KubeModelController>();
  private readonly matchers = new Map<string, (labels?: Record<string, string>) => boolean>();
  private workloadsElector?: LeaseElector;
  private workloadSyncPending = false;
  private stopped = false;
  private address?: string;
  /** Forwarded demand and stats, for tests and the state endpoint. */
  readonly counts = { forwarded: 0, dropped: 0 };

  constructor(options: KubeAutoscalerOptions) {
    this.options = options;
    this.log = options.log;
    this.platform = new KubePlatform(options.client);
    this.metrics = autoscalerMetrics(options.registry);
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
  }

  /** Starts watching and campaigning; `address` is where other replicas reach this one. */
  async start(address = this.options.address): Promise<void> {
    this.address = address;
    const { models, slots, pods, deployments, statefulsets } = this.informers;
    models.on({
      add: () => this.syncModels(),
      update: (m, old) => {
        // Status writes (ours) do not change what a Model asks for: its spec (generation) and labels do.
        const labels = (o: Model) => JSON.stringify(o.metadata.labels ?? {});
        if (m === old || m.metadata.generation !== old.metadata.generation || labels(m) !== labels(old))
          this.syncModels();
      },
      delete: () => this.syncModels(),
    });
    slots.on({ add: () => this.syncSlots(), update: () => this.syncSlots(), delete: () => this.syncSlots() });
    const podChanged = (pod: Pod) => this.pokeNamespace(pod.metadata.namespace, pod.metadata.labels);
    pods.on({ add: podChanged, update: podChanged, delete: podChanged });
    const workloadChanged = () => {
      for (const c of this.controllers.values()) c.changed();
      this.scheduleWorkloadSync();
    };
    deployments.on({ add: workloadChanged, update: workloadChanged, delete: workloadChanged });
    statefulsets.on({ add: workloadChanged, update: workloadChanged, delete: workloadChanged });
    if (await this.knativeServed()) {
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
    this.workloadsElector = new LeaseElector({
      client: this.options.client,
      namespace: this.options.leaseNamespace,
      name: workloadsLease(this.options.namespace),
      identity: this.options.identity,
      address: this.address,
      timing: this.options.leaseTiming,
      log: this.log,
      onStartedLeading: () => this.scheduleWorkloadSync(),
    });
    this.workloadsElector.start();
  }

  get ready(): boolean {
    return !this.stopped && Object.values(this.informers).every((i) => !i || i.synced);
  }

  /** Stops acting, releases every Lease it holds (a successor takes over at once), stops watching. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const c of this.controllers.values()) c.close();
    await Promise.all([
      ...[...this.units.values()].map((u) => u.lease.stop(true)),
      this.workloadsElector?.stop(true),
    ]);
    for (const unit of this.units.values()) for (const slot of unit.slots.values()) slot.standDown();
    await Promise.all(Object.values(this.informers).map((i) => i?.stop()));
  }

  private async knativeServed(): Promise<boolean> {
    try {
      await this.options.client.get("/apis/serving.knative.dev/v1");
      return true;
    } catch (error) {
      if (!isNotFound(error)) this.log.warn("could not tell whether Knative Serving is installed", { error });
      return false;
    }
  }

  // --- Models, units and Leases ---

  private syncModels(): void {
    if (this.stopped) return;
    const seen = new Set<string>();
    for (const resource of this.informers.models.list()) {
      const parsed = modelFromResource(resource);
      if ("error" in parsed) {
        this.log.warn("a Model does not parse; ignored", {
          model: resource.metadata.name,
          error: parsed.error,
        });
        continue;
      }
      seen.add(parsed.key);
      const unitKey = parsed.config.slot !== undefined ? `slot:${parsed.config.slot}` : `model:${parsed.key}`;
      const existing = this.controllers.get(parsed.key);
      if (existing && this.unitOf.get(parsed.key) === unitKey) {
        this.index(existing, parsed);
        existing.update(parsed);
        continue;
      }
      if (existing) this.removeController(parsed.key);
      this.addController(parsed, unitKey);
    }
    for (const key of [...this.controllers.keys()]) if (!seen.has(key)) this.removeController(key);
    this.syncSlots();
    this.scheduleWorkloadSync();
  }

  private index(controller: KubeModelController, model: KubeModel): void {
    for (const [id, c] of this.byId) if (c === controller && id !== model.config.id) this.byId.delete(id);
    const owner = this.byId.get(model.config.id);
    if (owner && owner !== controller)
      this.log.warn("two Models serve the same model id; the first one wins", {
        id: model.config.id,
        first: owner.model.key,
        second: model.key,
      });
    else this.byId.set(model.config.id, controller);
  }

  private addController(model: KubeModel, unitKey: string): void {
    const unit = this.unit(unitKey);
    let slot: KubeSlot | undefined;
    if (model.config.slot !== undefined) {
      slot = unit.slots.get(model.namespace);
      if (!slot) {
        const resourceKey = `${model.namespace}/${model.config.slot}`;
        slot = new KubeSlot(
          model.namespace,
          slotConfigFrom(model.config.slot, this.informers.slots.get(resourceKey)),
          {
            client: this.options.client,
            log: this.log,
            holding: () => unit.lease.leading,
            resource: () => this.informers.slots.get(resourceKey),
          },
        );
        unit.slots.set(model.namespace, slot);
        if (unit.lease.leading) slot.lead();
      }
    }
    const controller = new KubeModelController(model, {
      platform: this.platform,
      client: this.options.client,
      log: this.log,
      metrics: this.metrics,
      pods: () => this.podsOf(controller),
      workload: () => this.workloadOf(controller),
      resource: () => this.informers.models.get(controller.model.key),
      drainGraceMs: this.options.drainGraceMs ?? 1_000,
      holding: () => unit.lease.leading,
      slot,
    });
    this.controllers.set(model.key, controller);
    this.unitOf.set(model.key, unitKey);
    this.index(controller, model);
    slot?.members.set(model.key, controller);
    unit.models.add(model.key);
    if (unit.lease.leading) controller.lead();
  }

  private removeController(key: string): void {
    const controller = this.controllers.get(key);
    if (!controller) return;
    controller.close();
    this.controllers.delete(key);
    for (const [id, c] of this.byId) if (c === controller) this.byId.delete(id);
    const unitKey = this.unitOf.get(key)!;
    this.unitOf.delete(key);
    const unit = this.units.get(unitKey);
    if (!unit) return;
    unit.models.delete(key);
    for (const [ns, slot] of unit.slots) {
      slot.members.delete(key);
      if (slot.members.size === 0) {
        slot.standDown();
        unit.slots.delete(ns);
      }
    }
    if (unit.models.size === 0) {
      this.units.delete(unitKey);
      void unit.lease.stop(true);
    }
  }

  private unit(key: string): Unit {
    let unit = this.units.get(key);
    if (unit) return unit;
    // The webhooks rely on this name for slots: snooze-slot-<slot>, holder = the autoscaler pod.
    const name = key.startsWith("slot:")
      ? leaseName("snooze-slot", key.slice("slot:".length))
      : leaseName("snooze-model", key.slice("model:".length).replace("/", "."));
    const models = new Set<string>();
    const slots = new Map<string, KubeSlot>();
    const lease = new LeaseElector({
      client: this.options.client,
      namespace: this.options.leaseNamespace,
      name,
      identity: this.options.identity,
      address: this.address,
      timing: this.options.leaseTiming ?? defaultLeaseTiming,
      log: this.log,
      onStartedLeading: () => {
        for (const slot of slots.values()) slot.lead();
        for (const m of models) this.controllers.get(m)?.lead();
      },
      onStoppedLeading: () => {
        for (const m of models) this.controllers.get(m)?.standDown();
        for (const slot of slots.values()) slot.standDown();
      },
    });
    unit = { key, lease, models, slots };
    this.units.set(key, unit);
    lease.start();
    return unit;
  }

  private syncSlots(): void {
    for (const unit of this.units.values()) {
      for (const slot of unit.slots.values()) {
        slot.config = slotConfigFrom(slot.name, this.informers.slots.get(`${slot.namespace}/${slot.name}`));
        slot.changed();
      }
    }
  }

  // --- pods and workloads ---

  private workloadOf(controller: KubeModelController) {
    const { namespace, spec } = controller.model;
    const ref = spec.workloadRef;
    if (ref.kind === "Service") {
      const service = this.informers.knative?.get(`${namespace}/${ref.name}`);
      if (!service) return undefined;
      const selector = `serving.knative.dev/service=${ref.name}`;
      const live = this.podsBySelector(namespace, selector).filter(
        (p) => !p.metadata.deletionTimestamp,
      ).length;
      return { replicas: live, selector, scalable: false };
    }
    const informer = ref.kind === "StatefulSet" ? this.informers.statefulsets : this.informers.deployments;
    const workload = informer.get(`${namespace}/${ref.name}`);
    if (!workload) return undefined;
    return {
      replicas: workload.spec?.replicas ?? 1,
      selector: selectorString(workload.spec?.selector),
      scalable: true,
    };
  }

  private podsOf(controller: KubeModelController): Pod[] {
    const workload = this.workloadOf(controller);
    return workload ? this.podsBySelector(controller.model.namespace, workload.selector) : [];
  }

  private matcher(selector: string) {
    let matcher = this.matchers.get(selector);
    if (!matcher) {
      matcher = selectorMatcher(selector);
      this.matchers.set(selector, matcher);
    }
    return matcher;
  }

  private podsBySelector(namespace: string, selector: string): Pod[] {
    const matches = this.matcher(selector);
    return this.informers.pods
      .list()
      .filter((p) => p.metadata.namespace === namespace && matches(p.metadata.labels));
  }

  private pokeNamespace(namespace: string | undefined, labels: Record<string, string> | undefined): void {
    for (const controller of this.controllers.values()) {
      if (controller.model.namespace !== namespace || !controller.isLeading) continue;
      const workload = this.workloadOf(controller);
      if (workload && this.matcher(workload.selector)(labels)) controller.changed();
    }
  }

  // --- demand and stats from activators ---

  /** Demand for `model`: acted on here when this replica leads it, else forwarded to the leader. */
  demand(body: DemandBody, forwarded: boolean): void {
    const controller = this.byId.get(body.model);
    if (!controller) return;
    if (controller.isLeading) {
      controller.demand(body.activator, body.unreachable);
      return;
    }
    if (!forwarded) this.forward(controller, demandPath, body);
    else this.counts.dropped++;
  }

  stats(body: StatsBody, forwarded: boolean): void {
    const elsewhere = new Map<KubeModelController, StatsBody["models"]>();
    for (const entry of body.models) {
      const controller = this.byId.get(entry.model);
      if (!controller) continue;
      if (controller.isLeading) controller.stats(body.activator, entry.inFlight, entry.held);
      else if (!forwarded) elsewhere.set(controller, [...(elsewhere.get(controller) ?? []), entry]);
      else this.counts.dropped++;
    }
    // One request per leader.
    const byLeader = new Map<string, StatsBody["models"]>();
    for (const [controller, entries] of elsewhere) {
      const address = this.leaderAddress(controller);
      if (address) byLeader.set(address, [...(byLeader.get(address) ?? []), ...entries]);
    }
    for (const [address, models] of byLeader)
      this.post(address, statsPath, { activator: body.activator, models });
  }

  private leaderAddress(controller: KubeModelController): string | undefined {
    const unit = this.units.get(this.unitOf.get(controller.model.key) ?? "");
    const holder = unit?.lease.holder;
    if (!holder?.address || holder.identity === this.options.identity) return undefined;
    return holder.address;
  }

  private forward(controller: KubeModelController, path: string, body: unknown): void {
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
    void fetch(`${address}${path}`, {
      method: "POST",
      headers: { "content-type": "application/json", [forwardedHeader]: this.options.identity },
      body: JSON.stringify(body),
      signal: AbortSignal.timeout(2_000),
    })
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
      ...this.informers.deployments.list().map((workload) => ({ workload, kind: "Deployment" as const })),
      ...(this.informers.knative?.list() ?? []).map((workload) => ({ workload, kind: "Service" as const })),
    ];
    const wanted = new Set<string>();
    for (const { workload, kind } of workloads) {
      if (workload.metadata.deletionTimestamp) continue;
      const result = modelForWorkload(workload, kind);
      if (!result) continue;
      const key = `${workload.metadata.namespace}/${workload.metadata.name}`;
      if (result.problems) {
        this.log.warn("a workload's snooze.dev annotations are not valid; no Model", {
          workload: key,
          kind,
          problems: result.problems,
        });
        continue;
      }
      wanted.add(key);
      const existing = this.informers.models.get(key);
      const collection = paths.custom(group, version, "models", workload.metadata.namespace);
      if (existing && !ownedBy(existing, { kind, name: workload.metadata.name })) {
        this.log.info("a Model of the workload's name exists and is not the autoscaler's; leaving it", {
          workload: key,
        });
        continue;
      }
      if (
        existing &&
        sameSpec(existing.spec as Record<string, unknown>, result.model.spec as Record<string, unknown>)
      )
        continue;
      if (existing) {
        await client
          .delete(`${collection}/${existing.metadata.name}`, {
            preconditions: { uid: existing.metadata.uid, resourceVersion: existing.metadata.resourceVersion },
          })
          .catch((error: unknown) => {
            if (!isNotFound(error) && !isConflict(error)) throw error;
          });
        this.log.info("replacing the Model of a workload whose annotations changed", { workload: key });
      }
      await client.create(collection, result.model).then(
        () => this.log.info("created a Model for an annotated workload", { workload: key, kind }),
        (error: unknown) => {
          if (!isConflict(error)) throw error; // 409 AlreadyExists: the next sync compares again
        },
      );
    }
    for (const model of this.informers.models.list()) {
      const key = `${model.metadata.namespace}/${model.metadata.name}`;
      if (wanted.has(key) || model.metadata.labels?.[managedByLabel] !== managedByValue) continue;
      const owner = model.metadata.ownerReferences?.[0];
      const workload =
        owner?.kind === "Service"
          ? this.informers.knative?.get(key)
          : owner?.kind === "Deployment"
            ? this.informers.deployments.get(key)
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
        slots: [...u.slots.values()].map((s) => s.state()),
      })),
      models: [...this.controllers.values()].map((c) => c.state()),
      counts: this.counts,
      informers: Object.fromEntries(
        Object.entries(this.informers)
          .filter(([, i]) => i)
          .map(([name, i]) => [name, i!.counts]),
      ),
    };
  }
}
