import { group, version } from "../lib/kube/api-group.ts";
import { isNotFound, type KubeClient, type KubeObject, paths } from "../lib/kube/client.ts";
import type { Informer, InformerOptions } from "../lib/kube/informer.ts";
import type { Lease } from "../lib/kube/lease.ts";
import { slotLeaseName } from "../lib/kube/lease.ts";
import { kubeInformer } from "../lib/kube/list-watch.ts";
import type { Logger } from "../lib/log.ts";
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

/** Informer settings the webhooks do not choose themselves (tests shorten the back-off). */
export type CacheOptions = Pick<InformerOptions<KubeObject>, "backoff" | "staleMs">;

const models = (namespace?: string) => paths.custom(group, version, "models", namespace);
const slots = (namespace?: string) => paths.custom(group, version, "slots", namespace);

export class KubeClusterReader implements ClusterReader {
  readonly #client: KubeClient;
  readonly #models: Informer<KubeObject>;
  readonly #slots: Informer<KubeObject>;
  readonly #stopped = Promise.withResolvers<never>();
  #stopping = false;

  constructor(client: KubeClient, log: Logger, cache: CacheOptions = {}) {
    this.#client = client;
    // lib/kube's informer retries a failed list or watch with back-off and restarts a watch that
    // fell silent; the cache keeps what it had meanwhile. Nobody subscribes (the webhooks only
    // read the cache), so there is nothing to resync.
    // The back-off stays short: until both lists are in, /readyz says 503.
    const informer = (name: string, path: string) =>
      kubeInformer<KubeObject>(client, path, {
        name,
        log,
        resyncMs: 0,
        backoff: { initialMs: 250, maxMs: 5_000 },
        ...cache,
      });
    this.#models = informer(`models.${group}`, models());
    this.#slots = informer(`slots.${group}`, slots());
    this.#stopped.promise.catch(() => {});
  }

  /**
   * Lists and starts watching Models and Slots; resolves once both lists have arrived (a failed
   * list is retried meanwhile). Rejects when stopped first; a stopped reader does not start again.
   */
  async start(): Promise<void> {
    if (this.#stopping) throw new Error("the cluster reader was stopped; it does not start again");
    await Promise.race([Promise.all([this.#models.start(), this.#slots.start()]), this.#stopped.promise]);
  }

  /** Both caches hold a list (and stay usable, from the last events, while a watch reconnects). */
  get synced() {
    return this.#models.synced && this.#slots.synced;
  }

  async stop(): Promise<void> {
    this.#stopping = true;
    this.#stopped.reject(new Error("stopped before the caches were filled"));
    await Promise.all([this.#models.stop(), this.#slots.stop()]);
  }

  modelsReferencing(namespace: string, kind: WorkloadKind, name: string): unknown[] {
    return this.#models
      .list()
      .filter((m) => m.metadata.namespace === namespace && modelReferences(m, kind, name));
  }

  cachedModel(namespace: string, name: string) {
    return this.#models.get(`${namespace}/${name}`);
  }

  cachedSlot(namespace: string, name: string) {
    return this.#slots.get(`${namespace}/${name}`);
  }

  async readModel(namespace: string, name: string) {
    return notFoundAsUndefined(() => this.#client.get<KubeObject>(`${models(namespace)}/${name}`));
  }

  async readWorkload(namespace: string, kind: "Deployment" | "StatefulSet", name: string) {
    const plural = kind === "Deployment" ? "deployments" : "statefulsets";
    return notFoundAsUndefined(() =>
      this.#client.get<KubeObject>(`${paths.apps(plural, namespace)}/${name}`),
    );
  }

  async slotState(namespace: string, slot: string): Promise<SlotState> {
    const [modelList, deployments, statefulSets, slotObject] = await Promise.all([
      this.#client.list<KubeObject>(models(namespace)),
      this.#client.list<KubeObject>(paths.apps("deployments", namespace)),
      this.#client.list<KubeObject>(paths.apps("statefulsets", namespace)),
      notFoundAsUndefined(() => this.#client.get<KubeObject>(`${slots(namespace)}/${slot}`)),
    ]);
    const residents: Resident[] = [];
    for (const model of modelList.items) {
      if (modelSlot(model) !== slot) continue;
      const tier = modelResidentTier(model);
      if (tier) residents.push({ kind: "Model", name: model.metadata.name, tier });
    }
    const workloads = [
      ...deployments.items.map((w) => ["Deployment", w] as const),
      ...statefulSets.items.map((w) => ["StatefulSet", w] as const),
    ];
    for (const [kind, workload] of workloads) {
      if (annotationsOf(workload)[slotAnnotation] !== slot || workloadReplicas(workload) <= 0) continue;
      const tier = await this.workloadTier(namespace, workload);
      if (tier) residents.push({ kind, name: workload.metadata.name, tier });
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
    const pods = await this.#client.list<KubeObject>(paths.pods(namespace), { labelSelector });
    return workloadResidentTier(workload, pods.items);
  }

  async leaseHolder(leaseNamespace: string, slot: string): Promise<string | undefined> {
    const lease = await notFoundAsUndefined(() =>
      this.#client.get<Lease>(paths.lease(leaseNamespace, slotLeaseName(slot))),
    );
    return lease?.spec?.holderIdentity || undefined;
  }
}

async function notFoundAsUndefined<T>(read: () => Promise<T>): Promise<T | undefined> {
  try {
    return await read();
  } catch (error) {
    if (isNotFound(error)) return undefined;
    throw error;
  }
}
