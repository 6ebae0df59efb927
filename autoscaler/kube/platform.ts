import { engineWords } from "../../lib/engine-words.ts";
import { keepNewest } from "../../lib/keep-newest.ts";
import { isConflict, type KubeClient, KubeError, paths } from "../../lib/kube/client.ts";
import type { Informer } from "../../lib/kube/informer.ts";
import type { KubeModel } from "../../lib/kube/model-config.ts";
import {
  activationTraceAnnotation,
  awakeCondition,
  type ContainerState,
  type ContainerStatus,
  deletionCostAnnotation,
  drainEndsAnnotation,
  type Pod,
  podAddress,
  podLive,
  podUp,
  recordedSince,
  recordedTier,
  tierAnnotation,
  tierLabel,
  tierSinceAnnotation,
  unresponsiveAnnotation,
} from "../../lib/kube/pod-replica.ts";
import { selectorMatcher } from "../../lib/kube/selector.ts";
import type { Tier } from "../../lib/replica-event.ts";
import { EngineClient } from "../engine-client.ts";
import {
  type Departure,
  type Platform,
  type RecordedTier,
  type Replica,
  type ReplicaSetView,
  WriteConflict,
} from "../platform.ts";

/** A workload Snooze scales: where its scale subresource is. */
export interface WorkloadRef {
  namespace: string;
  apiVersion: string;
  kind: string;
  name: string;
}

/** What the platform needs to know of a workload, from the workload caches. */
export interface WorkloadView {
  replicas: number;
  selector: string;
  scalable: boolean;
  /** A pod whose start failed stays until startTimeout (`ReplicaSetView.keepFailedStarts`). */
  keepFailedStarts?: boolean;
  /** Knative's progress deadline of the revision, in ms (`ReplicaSetView.progressDeadline`). */
  progressDeadline?: number;
}

/** Someone else changed what we were about to change: re-read and decide again, never overwrite. */

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

export interface KubePlatformOptions {
  client: KubeClient;
  pods: Informer<Pod>;
  /** The workload of a Model, from the workload caches; undefined while unknown. */
  workload(model: KubeModel): WorkloadView | undefined;
}

/**
 * Models' replica sets on Kubernetes: a Model's replicas are the live pods its workload selects;
 * scale = the workload's scale subresource (down: the chosen pods cheapest to delete first); each
 * pod's tier is recorded in its annotations for every activator and a successor to see; engines
 * are reached on pod IPs. Every write is conditional on the resourceVersion it was decided on.
 */
export class KubePlatform implements Platform {
  private readonly options: KubePlatformOptions;
  private readonly models = new Map<string, KubeModel>();
  private readonly listeners: ((model: string, departure?: Departure) => void)[] = [];
  private readonly matchers = new Map<string, (labels?: Record<string, string>) => boolean>();
  private readonly awakeWritten = new Map<string, boolean>();

  constructor(options: KubePlatformOptions) {
    this.options = options;
  }

  /** The Models whose replicas this platform reports, by key. */
  setModel(model: KubeModel): void {
    this.models.set(model.key, model);
  }

  removeModel(key: string): void {
    this.models.delete(key);
  }

  workloadRef(model: KubeModel): WorkloadRef {
    return { namespace: model.namespace, ...model.spec.workloadRef };
  }

  replicaSet(key: string): ReplicaSetView | undefined {
    const model = this.models.get(key);
    const workload = model && this.options.workload(model);
    if (!model || !workload) return undefined;
    const replicas = this.podsOf(model, workload.selector)
      .filter(podLive)
      .map((pod) => replicaOf(pod, model.spec.port));
    return {
      replicas,
      scale: workload.replicas,
      scalable: workload.scalable,
      selector: workload.selector,
      ...(workload.keepFailedStarts ? { keepFailedStarts: true } : {}),
      ...(workload.progressDeadline !== undefined ? { progressDeadline: workload.progressDeadline } : {}),
    };
  }

  missingWorkload(key: string): string | undefined {
    const model = this.models.get(key);
    if (!model || this.options.workload(model)) return undefined;
    const { kind, name } = model.spec.workloadRef;
    return `${kind === "Service" ? "Knative Service" : kind} "${name}" (spec.workloadRef) does not exist in namespace "${model.namespace}": create it, or point spec.workloadRef at the workload that serves the model`;
  }

  /** The pods a selector picks in a Model's namespace (live or not). */
  podsOf(model: KubeModel, selector: string): Pod[] {
    const matches = this.matcher(selector);
    return this.options.pods
      .list()
      .filter((p) => p.metadata.namespace === model.namespace && matches(p.metadata.labels));
  }

  /** A pod or workload changed: tell the controllers of the Models it belongs to. */
  podChanged(pod: Pod): void {
    for (const model of this.models.values()) {
      if (model.namespace !== pod.metadata.namespace) continue;
      const workload = this.options.workload(model);
      if (workload && this.matcher(workload.selector)(pod.metadata.labels)) this.notify(model.key);
    }
  }

  workloadsChanged(): void {
    for (const key of this.models.keys()) this.notify(key);
  }

  onChange(listener: (model: string, departure?: Departure) => void): void {
    this.listeners.push(listener);
  }

  async close(): Promise<void> {
    // The pods belong to their workloads; they outlive any one autoscaler replica.
  }

  engine(replica: Replica): EngineClient {
    if (!replica.address) throw new Error(`pod ${replica.id} has no IP`);
    return new EngineClient(replica.address);
  }

  /**
   * Records a pod's tier (and its deletion cost). Conditional on the pod's resourceVersion; when it
   * moved (the kubelet writes status all the time), the pod is read again and the write retried only
   * if the tier on it is still the one we believed: otherwise another writer acted, and we stop.
   */
  async recordTier(
    key: string,
    replica: Replica,
    { tier, since, traceparent, endsAt, unresponsive }: RecordedTier,
    believed?: Tier,
  ): Promise<void> {
    const path = paths.pod(this.namespaceOf(key), replica.id);
    let current = this.pod(key, replica.id) ?? (await this.options.client.get<Pod>(path));
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        await this.options.client.patch<Pod>(path, {
          metadata: {
            resourceVersion: current.metadata.resourceVersion,
            labels: { [tierLabel]: tier },
            annotations: {
              [tierAnnotation]: tier,
              [tierSinceAnnotation]: new Date(since).toISOString(),
              // Only while an activation runs; null removes it (merge patch).
              [activationTraceAnnotation]: traceparent ?? null,
              // Only while it drains: when requests still in flight to it are ended.
              [drainEndsAnnotation]: endsAt === undefined ? null : new Date(endsAt).toISOString(),
              [unresponsiveAnnotation]: unresponsive ? "true" : null,
              [deletionCostAnnotation]: String(deletionCost[tier]),
            },
          },
        });
        await this.setAwake(path, current, tier === "ready", since);
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
        current = await this.options.client.get<Pod>(path);
        const onPod = recordedTier(current);
        if (onPod !== believed && onPod !== tier)
          throw new WriteConflict(
            `pod ${replica.id}: tier is "${onPod}", not "${believed}" as believed; another writer acted`,
          );
      }
    }
    throw new WriteConflict(`pod ${replica.id}: the pod kept changing; will decide again`);
  }

  /**
   * Sets the workload's replicas from `expected` to `to`, marking `remove` as the first to go.
   * Reads the scale first and refuses (WriteConflict) when it is not `expected`: the decision was
   * made on a count that no longer holds. The write carries the resourceVersion it read, so a change
   * in between is a 409, never overwritten. A 409 is read again: the Deployment controller writes
   * the workload's status after every scale, which changes its resourceVersion but not the count,
   * so a write that follows another one closely is refused for nothing more than that.
   */
  async scale(key: string, expected: number, to: number, remove: readonly Replica[]): Promise<void> {
    const model = this.models.get(key);
    if (!model) throw new WriteConflict(`Model ${key} is gone`);
    for (const replica of remove) await this.markForRemoval(key, replica.id);
    const ref = this.workloadRef(model);
    const scalePath = this.scalePath(ref);
    for (let attempt = 0; attempt < 8; attempt++) {
      const scale = await this.options.client.get<{
        metadata: { resourceVersion: string };
        spec?: { replicas?: number };
      }>(scalePath);
      const current = scale.spec?.replicas ?? 0;
      if (current !== expected)
        throw new WriteConflict(`${ref.kind} ${ref.name} has ${current} replicas, not ${expected}`);
      try {
        await this.options.client.replace(scalePath, {
          apiVersion: "autoscaling/v1",
          kind: "Scale",
          metadata: {
            name: ref.name,
            namespace: ref.namespace,
            resourceVersion: scale.metadata.resourceVersion,
          },
          spec: { replicas: to },
        });
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
      }
    }
    throw new WriteConflict(`${ref.kind} ${ref.name} kept changing while scaling`);
  }

  /**
   * The readiness gate's condition: True only while the tier is ready. A strategic merge patch of
   * the status merges conditions by type, so the kubelet's own stay as they are. Written only when
   * it changes.
   */
  private async setAwake(path: string, pod: Pod, awake: boolean, since: number): Promise<void> {
    const status = awake ? "True" : "False";
    // What this process wrote last (the cache may not show it yet, so it is not asked).
    const uid = pod.metadata.uid ?? pod.metadata.name;
    if (this.awakeWritten.get(uid) === awake) return;
    await this.options.client.patch(
      `${path}/status`,
      {
        status: {
          conditions: [
            {
              type: awakeCondition,
              status,
              reason: awake ? "EngineAwake" : "EngineNotAwake",
              message: awake
                ? "the engine is awake and takes requests"
                : "the engine sleeps, starts or drains",
              lastTransitionTime: new Date(since).toISOString().replace(/\.\d+Z$/, "Z"),
            },
          ],
        },
      },
      "strategic",
    );
    keepNewest(this.awakeWritten, uid, awake, 10_000);
  }

  /** Marks a pod as the first to go on the next scale-down. */
  private async markForRemoval(key: string, name: string): Promise<void> {
    const path = paths.pod(this.namespaceOf(key), name);
    let current = this.pod(key, name) ?? (await this.options.client.get<Pod>(path));
    for (let attempt = 0; attempt < 8; attempt++) {
      try {
        await this.options.client.patch(path, {
          metadata: {
            resourceVersion: current.metadata.resourceVersion,
            annotations: { [deletionCostAnnotation]: String(stoppingCost) },
          },
        });
        return;
      } catch (error) {
        if (!isConflict(error)) throw error;
        current = await this.options.client.get<Pod>(path);
      }
    }
    throw new WriteConflict(`pod ${name}: the pod kept changing`);
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

  private namespaceOf(key: string): string {
    return this.models.get(key)?.namespace ?? key.split("/")[0]!;
  }

  private pod(key: string, name: string): Pod | undefined {
    return this.options.pods.get(`${this.namespaceOf(key)}/${name}`);
  }

  private notify(key: string): void {
    for (const listener of this.listeners) listener(key);
  }

  private matcher(selector: string) {
    let matcher = this.matchers.get(selector);
    if (!matcher) {
      matcher = selectorMatcher(selector);
      this.matchers.set(selector, matcher);
    }
    return matcher;
  }
}

/** A pod as a replica: Ready is up; its recorded tier lets a new leader start where the last one was. */
function replicaOf(pod: Pod, port: number): Replica {
  const recorded = recordedTier(pod);
  const created = Date.parse(pod.metadata.creationTimestamp ?? "");
  const createdAt = Number.isFinite(created) ? created : Date.now();
  const up = podUp(pod);
  const failing = up ? undefined : cannotStart(pod);
  const crashed = failing !== undefined && engineExited(pod);
  return {
    id: pod.metadata.name,
    label: `pod ${pod.metadata.name}`,
    uid: pod.metadata.uid ?? pod.metadata.name,
    address: podAddress(pod, port),
    up,
    createdAt,
    restarts: engineStatus(pod)?.restartCount ?? 0,
    node: pod.spec?.nodeName ?? "",
    ...(recorded ? { recorded: { tier: recorded, since: recordedSince(pod) ?? createdAt } } : {}),
    ...(failing !== undefined ? { failing } : {}),
    ...(crashed ? { crashed: true } : {}),
  };
}

/**
 * The engine container's status: the pod's first container, found by name (the kubelet lists
 * container statuses sorted by name, so a sidecar such as Knative's queue-proxy may come first).
 */
function engineStatus(pod: Pod): ContainerStatus | undefined {
  const statuses = pod.status?.containerStatuses ?? [];
  const name = pod.spec?.containers?.[0]?.name;
  return (name !== undefined ? statuses.find((s) => s.name === name) : undefined) ?? statuses[0];
}

/**
 * The kubelet's waiting reasons (its own strings) of a container that will not run as it is: an
 * image that cannot be pulled or is not there, a container the runtime cannot create or run. Each
 * stays until someone changes the pod or what it names (the image, a Secret, the command), so
 * waiting out startTimeout only keeps held requests waiting; they count for every container of the
 * pod. Not among them: `ContainerCreating` and `PodInitializing` (a pull, even a slow one of a large
 * image, shows as ContainerCreating), nor an unschedulable pod, whose container has no status yet
 * (a cluster autoscaler may add a GPU node within minutes).
 */
const cannotRunReasons = new Set([
  "ErrImagePull",
  "ImagePullBackOff",
  "InvalidImageName",
  "ErrImageNeverPull",
  "CreateContainerConfigError",
  "CreateContainerError",
  "RunContainerError",
]);
/** For the engine container, also one that keeps exiting (see otherContainerCannotRun for the others). */
const failingReasons = new Set([...cannotRunReasons, "CrashLoopBackOff"]);

/** Longest reason kept: it goes into every 503, the Model's status and `lastError`. */
const maxReasonLength = 2_000;

/**
 * Why a pod that is not up cannot come up as it is, from its engine container's status, else from
 * another container's or an init container's that cannot run; undefined while it may still come up. As Knative Serving's revision reconciler reads a container's waiting
 * reason and last termination: the kubelet's reason and message, and for an engine that exited,
 * the exit code, reason and message of its last termination.
 */
export function cannotStart(pod: Pod): string | undefined {
  const status = engineStatus(pod);
  const waiting = status?.state?.waiting;
  // Named as a sidecar is (`container "auth-proxy": …`), so a pod of several containers says which.
  const engine = `engine container ${JSON.stringify(status?.name ?? pod.spec?.containers?.[0]?.name ?? "")}`;
  let reason: string | undefined;
  if (waiting?.reason && failingReasons.has(waiting.reason)) {
    reason = `${engine}: ${waitingReason(waiting)}`;
    const last = status?.lastState?.terminated;
    if (waiting.reason === "CrashLoopBackOff" && last) reason += `; last ${termination(last)}`;
  } else if (status?.state?.terminated) {
    reason = `the ${engine} ${termination(status.state.terminated)} during its start`;
  } else reason = otherContainerCannotRun(pod, status);
  // The kubelet's messages hold the engine's own words (its termination log, its last lines).
  if (reason === undefined || reason.length <= maxReasonLength) return reason && engineWords(reason);
  const half = Math.floor((maxReasonLength - 3) / 2);
  return engineWords(`${reason.slice(0, half)} … ${reason.slice(-half)}`);
}

function waitingReason(waiting: { reason?: string; message?: string }): string {
  return waiting.message ? `${waiting.reason}: ${waiting.message}` : `${waiting.reason}`;
}

/**
 * An init container or a sidecar that will not run as it is (an image that cannot be pulled, a
 * Secret it names that is not there): the pod is Ready only once every one of them has run, so it
 * never will. Their crash loops are not counted: an init container may be waiting for what the
 * engine needs (weights to download, a mount) and succeed on a later try.
 */
function otherContainerCannotRun(pod: Pod, engine: ContainerStatus | undefined): string | undefined {
  const kinds = [
    ["init container", pod.status?.initContainerStatuses ?? []],
    ["container", pod.status?.containerStatuses ?? []],
  ] as const;
  for (const [kind, statuses] of kinds) {
    for (const status of statuses) {
      const waiting = status.state?.waiting;
      if (status === engine || !waiting?.reason || !cannotRunReasons.has(waiting.reason)) continue;
      return `${kind} ${JSON.stringify(status.name ?? "")}: ${waitingReason(waiting)}`;
    }
  }
  return undefined;
}

/** The engine container exited on its own: it crash-loops, or it terminated. */
function engineExited(pod: Pod): boolean {
  const state = engineStatus(pod)?.state;
  return state?.waiting?.reason === "CrashLoopBackOff" || state?.terminated !== undefined;
}

function termination(t: NonNullable<ContainerState["terminated"]>): string {
  const how = t.signal ? `killed by signal ${t.signal}` : `exited with code ${t.exitCode ?? "unknown"}`;
  return `${how}${t.reason ? ` (${t.reason})` : ""}${t.message ? `: ${t.message.trim()}` : ""}`;
}
