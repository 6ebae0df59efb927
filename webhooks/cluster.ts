import { setTimeout as sleep } from "node:timers/promises";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type Informer,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type ListWatch,
  makeInformer,
  type ObjectCache,
} from "@kubernetes/client-node";
import { group, version } from "../lib/kube/api-group.ts";
import type { Logger } from "../lib/log.ts";
import { slotLeaseName } from "./messages.ts";
import { annotationsOf, at, stringAt } from "./object-path.ts";
import {
  modelReferences,
  modelResidentTier,
  modelSlot,
  selectorString,
  slotAnnotation,
  type WorkloadKind,
  workloadReplicas,
  workloadResidentTier,
} from "./slot-members.ts";
import type { Resident, SlotState } from "./slot-residency.ts";

/**
 * What the webhooks read from the cluster.
 *
 * Hot paths (every workload write, every pod of a slot member) only need Models (which workload
 * belongs to which slot) and Slots (the device): those come from informer caches of Snooze's own
 * two CRDs, so they cost no API call and their memory is bounded by the number of Models and
 * Slots, not by the cluster's pods. The residency rule decides on fresh reads instead (Models,
 * Deployments, StatefulSets and pods of one namespace, the Slot, the Lease): it runs only when a
 * member goes from 0 replicas up, which is rare and followed by a pod start anyway, and a cache
 * that lags by a few milliseconds must not let a second resident through.
 */
export interface ClusterReader {
  /** Models in `namespace` whose spec.workloadRef names this workload (cache). */
  modelsReferencing(namespace: string, kind: WorkloadKind, name: string): unknown[];
  /** A Model (cache). */
  cachedModel(namespace: string, name: string): unknown | undefined;
  /** A Slot (cache). */
  cachedSlot(namespace: string, name: string): unknown | undefined;
  readModel(namespace: string, name: string): Promise<unknown | undefined>;
  readWorkload(
    namespace: string,
    kind: "Deployment" | "StatefulSet",
    name: string,
  ): Promise<unknown | undefined>;
  /** Residents and swap of a slot, read fresh. */
  slotState(namespace: string, slot: string): Promise<SlotState>;
  /** The tier of a member workload if it is resident (its pods read fresh). */
  workloadTier(namespace: string, workload: unknown): Promise<string | undefined>;
  /** holderIdentity of the slot's Lease (snooze-slot-<slot>) in the autoscaler's namespace. */
  leaseHolder(leaseNamespace: string, slot: string): Promise<string | undefined>;
}

type Cache = Informer<KubernetesObject> & ObjectCache<KubernetesObject>;

export class KubeClusterReader implements ClusterReader {
  readonly #custom: CustomObjectsApi;
  readonly #apps: AppsV1Api;
  readonly #core: CoreV1Api;
  readonly #coordination: CoordinationV1Api;
  readonly #models: Cache;
  readonly #slots: Cache;
  readonly #log: Logger;
  #synced = false;
  #stopped = false;

  constructor(kc: KubeConfig, log: Logger) {
    this.#custom = kc.makeApiClient(CustomObjectsApi);
    this.#apps = kc.makeApiClient(AppsV1Api);
    this.#core = kc.makeApiClient(CoreV1Api);
    this.#coordination = kc.makeApiClient(CoordinationV1Api);
    this.#log = log;
    const list = (plural: string) => () =>
      this.#custom.listClusterCustomObject({ group, version, plural }) as Promise<
        KubernetesListObject<KubernetesObject>
      >;
    this.#models = makeInformer(kc, `/apis/${group}/${version}/models`, list("models"));
    this.#slots = makeInformer(kc, `/apis/${group}/${version}/slots`, list("slots"));
    for (const [name, informer] of [
      ["models", this.#models],
      ["slots", this.#slots],
    ] as const) {
      // A failed list or watch stops the informer (client-node reports it and leaves the restart
      // to us); the cache keeps what it had meanwhile.
      informer.on("error", (error: unknown) => {
        if (this.#stopped) return;
        this.#log.warn("watch failed; reconnecting", { resource: name, error: String(error) });
        setTimeout(() => {
          if (!this.#stopped) informer.start().catch(() => {});
        }, 1_000).unref();
      });
    }
  }

  /** Lists and starts watching Models and Slots; resolves once both lists have arrived. */
  async start(): Promise<void> {
    this.#stopped = false;
    await Promise.all([this.#models.start(), this.#slots.start()]);
    // start() also returns when the list failed (the error handler retries): wait for a list.
    const listed = (informer: Cache) =>
      (informer as unknown as ListWatch<KubernetesObject>).latestResourceVersion() !== "";
    while (!(listed(this.#models) && listed(this.#slots))) {
      if (this.#stopped) throw new Error("stopped before the caches were filled");
      await sleep(200);
    }
    this.#synced = true;
  }

  get synced() {
    return this.#synced;
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    await Promise.all([this.#models.stop(), this.#slots.stop()]);
  }

  modelsReferencing(namespace: string, kind: WorkloadKind, name: string): unknown[] {
    return this.#models.list(namespace).filter((m) => modelReferences(m, kind, name));
  }

  cachedModel(namespace: string, name: string) {
    return this.#models.get(name, namespace);
  }

  cachedSlot(namespace: string, name: string) {
    return this.#slots.get(name, namespace);
  }

  async readModel(namespace: string, name: string) {
    return notFoundAsUndefined(() =>
      this.#custom.getNamespacedCustomObject({ group, version, namespace, plural: "models", name }),
    );
  }

  async readWorkload(namespace: string, kind: "Deployment" | "StatefulSet", name: string) {
    return notFoundAsUndefined(() =>
      kind === "Deployment"
        ? this.#apps.readNamespacedDeployment({ namespace, name })
        : this.#apps.readNamespacedStatefulSet({ namespace, name }),
    );
  }

  async slotState(namespace: string, slot: string): Promise<SlotState> {
    const [models, deployments, statefulSets, slotObject] = await Promise.all([
      this.#custom.listNamespacedCustomObject({ group, version, namespace, plural: "models" }) as Promise<{
        items: unknown[];
      }>,
      this.#apps.listNamespacedDeployment({ namespace }),
      this.#apps.listNamespacedStatefulSet({ namespace }),
      notFoundAsUndefined(() =>
        this.#custom.getNamespacedCustomObject({ group, version, namespace, plural: "slots", name: slot }),
      ),
    ]);
    const residents: Resident[] = [];
    for (const model of models.items) {
      if (modelSlot(model) !== slot) continue;
      const tier = modelResidentTier(model);
      if (tier) residents.push({ kind: "Model", name: stringAt(model, "metadata", "name") ?? "", tier });
    }
    const workloads = [
      ...deployments.items.map((w) => ["Deployment", w] as const),
      ...statefulSets.items.map((w) => ["StatefulSet", w] as const),
    ];
    for (const [kind, workload] of workloads) {
      if (annotationsOf(workload)[slotAnnotation] !== slot || workloadReplicas(workload) <= 0) continue;
      const tier = await this.workloadTier(namespace, workload);
      if (tier) residents.push({ kind, name: workload.metadata?.name ?? "", tier });
    }
    // The autoscaler's own record of the resident counts too, even before its pods show it.
    const recorded = stringAt(slotObject, "status", "resident");
    if (recorded && !residents.some((r) => r.kind === "Model" && r.name === recorded)) {
      residents.push({ kind: "Model", name: recorded, tier: "resident in the Slot's status" });
    }
    const transition = at(slotObject, "status", "transition") as SlotState["transition"] | undefined;
    return { residents, ...(transition && typeof transition.to === "string" ? { transition } : {}) };
  }

  async workloadTier(namespace: string, workload: unknown): Promise<string | undefined> {
    const labelSelector = selectorString(workload);
    if (!labelSelector) return workloadResidentTier(workload, []);
    const pods = await this.#core.listNamespacedPod({ namespace, labelSelector });
    return workloadResidentTier(workload, pods.items);
  }

  async leaseHolder(leaseNamespace: string, slot: string): Promise<string | undefined> {
    const lease = await notFoundAsUndefined(() =>
      this.#coordination.readNamespacedLease({ namespace: leaseNamespace, name: slotLeaseName(slot) }),
    );
    return lease?.spec?.holderIdentity ?? undefined;
  }
}

async function notFoundAsUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if ((error as { code?: number }).code === 404) return undefined;
    throw error;
  }
}
