import { isConflict, type KubeClient, KubeError, paths } from "../lib/kube/client.ts";
import {
  deletionCostAnnotation,
  type Pod,
  recordedTier,
  tierAnnotation,
  tierSinceAnnotation,
} from "../lib/kube/pod-replica.ts";
import type { Tier } from "../lib/replica-event.ts";
import { EngineClient } from "./engine-client.ts";

/** A workload Snooze scales: where its scale subresource is. */
export interface WorkloadRef {
  namespace: string;
  apiVersion: string;
  kind: string;
  name: string;
}

/** Someone else changed what we were about to change: re-read and decide again, never overwrite. */
export class WriteConflict extends Error {}

/**
 * Deletion cost by tier: when a workload scales down, the ReplicaSet removes the cheapest pod
 * first, so pods Snooze stops go first, then deep sleepers, and awake pods last.
 */
const deletionCost: Record<Tier, number> = {
  ready: 1000,
  waking: 900,
  starting: 800,
  draining: 500,
  "asleep-1": 200,
  "asleep-2": 100,
  cold: 0,
};
export const stoppingCost = -1000;

/**
 * What the Kubernetes control plane asks of the cluster and the engines, the counterpart of the
 * local platform: start = scale the workload's scale subresource up, stop = scale it down with the
 * chosen pod cheapest to delete, sleep and wake = vLLM's sleep API on the pod's IP, and each pod's
 * tier recorded in its annotations for every activator to see. Every write to the API is
 * conditional on the resourceVersion it was decided on.
 */
export class KubePlatform {
  private readonly client: KubeClient;

  constructor(client: KubeClient) {
    this.client = client;
  }

  /**
   * Records a pod's tier (and its deletion cost). Conditional on the pod's resourceVersion; when it
   * moved (the kubelet writes status all the time), the pod is read again and the write retried only
   * if the tier on it is still the one we believed: otherwise another writer acted, and we stop.
   */
  async recordTier(pod: Pod, tier: Tier, since: number, believed: Tier | undefined): Promise<Pod> {
    let current = pod;
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        return await this.client.patch<Pod>(paths.pod(current.metadata.namespace!, current.metadata.name), {
          metadata: {
            resourceVersion: current.metadata.resourceVersion,
            annotations: {
              [tierAnnotation]: tier,
              [tierSinceAnnotation]: new Date(since).toISOString(),
              [deletionCostAnnotation]: String(deletionCost[tier]),
            },
          },
        });
      } catch (error) {
        if (!isConflict(error)) throw error;
        current = await this.client.get<Pod>(paths.pod(current.metadata.namespace!, current.metadata.name));
        const onPod = recordedTier(current);
        if (onPod !== believed && onPod !== tier)
          throw new WriteConflict(
            `pod ${current.metadata.name}: tier is "${onPod}", not "${believed}" as believed; another writer acted`,
          );
      }
    }
    throw new WriteConflict(`pod ${pod.metadata.name}: the pod kept changing; will decide again`);
  }

  /** Marks pods as the first to go on the next scale-down. */
  async markForRemoval(pod: Pod): Promise<void> {
    let current = pod;
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        await this.client.patch(paths.pod(current.metadata.namespace!, current.metadata.name), {
          metadata: {
            resourceVersion: current.metadata.resourceVersion,
            annotations: { [deletionCostAnnotation]: String(stoppingCost) },
          },
        });
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
        current = await this.client.get<Pod>(paths.pod(current.metadata.namespace!, current.metadata.name));
      }
    }
    throw new WriteConflict(`pod ${pod.metadata.name}: the pod kept changing`);
  }

  private scalePath(ref: WorkloadRef): string {
    if (ref.apiVersion !== "apps/v1")
      throw new KubeError(
        422,
        "Unsupported",
        `${ref.kind} ${ref.name}: Snooze scales apps/v1 workloads; a Knative Service's pod count belongs to Knative`,
      );
    const plural = ref.kind === "StatefulSet" ? "statefulsets" : "deployments";
    return `${paths.apps(plural, ref.namespace)}/${ref.name}/scale`;
  }

  async readScale(ref: WorkloadRef): Promise<{ replicas: number; resourceVersion: string }> {
    const scale = await this.client.get<{
      metadata: { resourceVersion: string };
      spec?: { replicas?: number };
    }>(this.scalePath(ref));
    return { replicas: scale.spec?.replicas ?? 0, resourceVersion: scale.metadata.resourceVersion };
  }

  /**
   * Sets the workload's replicas from `expected` to `to`. Reads the scale first and refuses
   * (WriteConflict) when it is not `expected`: the decision was made on a count that no longer holds.
   * The write carries the resourceVersion it read, so a change in between is a 409, never overwritten.
   */
  async scale(ref: WorkloadRef, expected: number, to: number): Promise<void> {
    const current = await this.readScale(ref);
    if (current.replicas !== expected)
      throw new WriteConflict(`${ref.kind} ${ref.name} has ${current.replicas} replicas, not ${expected}`);
    try {
      await this.client.replace(this.scalePath(ref), {
        apiVersion: "autoscaling/v1",
        kind: "Scale",
        metadata: { name: ref.name, namespace: ref.namespace, resourceVersion: current.resourceVersion },
        spec: { replicas: to },
      });
    } catch (error) {
      if (isConflict(error)) throw new WriteConflict(`${ref.kind} ${ref.name} changed while scaling`);
      throw error;
    }
  }

  engine(address: string): EngineClient {
    return new EngineClient(address);
  }
}
