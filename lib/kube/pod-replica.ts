import { isWarming, type ReplicaEvent, type Tier, tiers } from "../replica-event.ts";
import type { KubeObject } from "./client.ts";

/**
 * A pod as one replica of a model. The autoscaler records each pod's tier in its annotations; every
 * activator reads them through its pod watch. Pods stay plain JSON.
 */
export interface Pod extends KubeObject {
  spec?: {
    nodeName?: string;
    containers?: { name?: string; ports?: { containerPort: number; name?: string }[] }[];
  };
  status?: {
    phase?: string;
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: ContainerStatus[];
    /** Init containers, native sidecars (an init container that keeps running) among them. */
    initContainerStatuses?: ContainerStatus[];
  };
}

/** What a pod's status says of one container (the fields Snooze reads). */
export interface ContainerStatus {
  name?: string;
  restartCount?: number;
  state?: ContainerState;
  lastState?: ContainerState;
}

export interface ContainerState {
  waiting?: { reason?: string; message?: string };
  running?: { startedAt?: string };
  terminated?: { exitCode?: number; signal?: number; reason?: string; message?: string };
}

export const tierAnnotation = "snooze.dev/tier";
/** The tier as a label too, so `kubectl get pods -L snooze.dev/tier` and selectors show it. */
export const tierLabel = "snooze.dev/tier";
/**
 * The readiness gate the mutating webhook puts on model pods and the autoscaler sets: True only
 * while the pod's engine is awake and routable, so Services, EndpointSlices, the HPA, KEDA and
 * Knative count a sleeping, starting or draining pod as not Ready (vLLM's /health says 200 asleep).
 */
export const awakeCondition = "snooze.dev/awake";
export const tierSinceAnnotation = "snooze.dev/tier-since";
/**
 * While a pod starts or wakes: the W3C traceparent of that activation's span, so every activator
 * links the requests it holds to the activation, as local mode's in-process events do.
 */
export const activationTraceAnnotation = "snooze.dev/activation-traceparent";
/**
 * While a pod drains: when its drain time is over (ISO time). Every activator ends the requests
 * still in flight to it then, as local mode's in-process events tell them.
 */
export const drainEndsAnnotation = "snooze.dev/drain-ends-at";
/** While a pod drains because its engine stopped answering: "true" (activators tell clients so). */
export const unresponsiveAnnotation = "snooze.dev/unresponsive";
/** The ReplicaSet controller removes pods with the lowest cost first when it scales down. */
export const deletionCostAnnotation = "controller.kubernetes.io/pod-deletion-cost";

const knownTiers = new Set<string>(tiers);

/** The tier the autoscaler recorded on the pod, if any (an unknown value counts as none). */
export function recordedTier(pod: Pod): Tier | undefined {
  const value = pod.metadata.annotations?.[tierAnnotation];
  return value && knownTiers.has(value) ? (value as Tier) : undefined;
}

export function recordedSince(pod: Pod): number | undefined {
  const value = pod.metadata.annotations?.[tierSinceAnnotation];
  const ms = value ? Date.parse(value) : Number.NaN;
  return Number.isFinite(ms) ? ms : undefined;
}

/** The pod's Ready condition: the readiness probe passed and, with Snooze's gate, the engine is awake. */
export function podReady(pod: Pod): boolean {
  return pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
}

/**
 * The engine is up: its containers passed their readiness probe (ContainersReady; Ready where the
 * kubelet reports no ContainersReady). Not Ready, which waits for the awake gate as well.
 */
export function podUp(pod: Pod): boolean {
  const conditions = pod.status?.conditions ?? [];
  const containers = conditions.find((c) => c.type === "ContainersReady");
  return containers ? containers.status === "True" : podReady(pod);
}

export const podDeleting = (pod: Pod) => !!pod.metadata.deletionTimestamp;
export const podFinished = (pod: Pod) => pod.status?.phase === "Succeeded" || pod.status?.phase === "Failed";

/** A pod that counts as a replica: not being deleted, not finished. */
export const podLive = (pod: Pod) => !podDeleting(pod) && !podFinished(pod);

export function podAddress(pod: Pod, port: number): string | undefined {
  const ip = pod.status?.podIP;
  if (!ip) return undefined;
  return ip.includes(":") ? `[${ip}]:${port}` : `${ip}:${port}`;
}

/**
 * The replica event an activator derives from a pod. Routable (tier `ready`) only when the
 * autoscaler recorded `ready` AND the pod's containers pass their readiness probe
 * (`ContainersReady`): a ready engine whose probe fails, or one whose tier was never recorded,
 * takes no traffic. Not the pod's Ready, which adds the awake gate the autoscaler opens right after
 * recording `ready`: that gate is for Services, the HPA and Knative, and waiting for the kubelet to
 * fold it into Ready added a kubelet round trip to every wake (in the e2e suite the first answer came
 * 44–99 ms after `ready` with it, 32–46 ms without). A pod
 * going away is cold, so the activator drops it at once.
 */
export function replicaEventForPod(model: string, pod: Pod, port: number): ReplicaEvent {
  const replica = pod.metadata.name;
  const since = recordedSince(pod) ?? Date.parse(pod.metadata.creationTimestamp ?? "") ?? Date.now();
  if (!podLive(pod)) return { model, replica, tier: "cold", since: Date.now() };
  const recorded = recordedTier(pod);
  const address = podAddress(pod, port);
  let tier: Tier = recorded ?? "starting";
  // Recorded ready but the probe fails: not routable; "waking" keeps held requests waiting.
  if (tier === "ready" && !podUp(pod)) tier = "waking";
  const traceparent = isWarming(tier) ? pod.metadata.annotations?.[activationTraceAnnotation] : undefined;
  const endsAt =
    tier === "draining" ? Date.parse(pod.metadata.annotations?.[drainEndsAnnotation] ?? "") : Number.NaN;
  const unresponsive = tier === "draining" && pod.metadata.annotations?.[unresponsiveAnnotation] === "true";
  return {
    model,
    replica,
    address,
    tier,
    since: Number.isFinite(since) ? since : Date.now(),
    ...(traceparent ? { traceparent } : {}),
    ...(Number.isFinite(endsAt) ? { endsAt } : {}),
    ...(unresponsive ? { unresponsive: true as const } : {}),
  };
}
