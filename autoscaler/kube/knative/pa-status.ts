import type { ModelStatusInput } from "../../../lib/kube/model-resource.ts";
import { type KnativeDefaults, knativeDefaults } from "./autoscaler-config.ts";
import {
  type KnativeCondition,
  knativeAnnotation,
  type PodAutoscaler,
  type PodAutoscalerStatus,
} from "./revision-model.ts";

/**
 * A Snooze-class PodAutoscaler's status, pure: what Knative's revision reconciler reads to make the
 * Revision Ready and to show its replicas. The conditions are Knative's (a living condition set):
 * - `Active`: True while a pod is awake (the Model's phase Ready); Unknown while one starts
 *   (`Queued`, Knative's word; `ActivationFailed` with why while a pod whose start failed is
 *   kept) or wakes; False when all pods sleep (`Asleep`), none is left (`NoTraffic`, as the KPA
 *   says at zero), or the last activation failed. Knative treats Active
 *   as informational: a Revision asleep or at zero stays Ready, as a KPA revision at zero does.
 * - `ScaleTargetInitialized`: True once as many pods are up as `max(min-scale, initial-scale)`
 *   (each config-autoscaler's when its annotation is absent: initial-scale 1 by default), and then
 *   for good, as the KPA keeps it. False (`InvalidSettings`) for a revision whose `snooze.dev/*`
 *   annotations are invalid: it has no Model, so the pods Knative started do not count, and
 *   Knative marks the revision failed instead of routing to it.
 * - `SKSReady`: True once the ServerlessService has its public and private Services. The SKS is in
 *   Serve mode; its endpoints being empty at zero does not matter, because requests reach the
 *   revision through Snooze's activator, which holds them while the revision is cold or asleep.
 * - `Ready`: all three True; else the first False, else the first Unknown, with its reason.
 * `desiredScale` is the pods Snooze asks of the Deployment; `actualScale` the pods up (awake or
 * asleep: both exist), so `kubectl get revisions` agrees with `kubectl get pods`.
 */
export interface PaObservation {
  pa: PodAutoscaler;
  /** The Model's status as its writer published it; undefined before the Model has one. */
  model?: ModelStatusInput;
  /** Why no Model could be made (invalid snooze.dev annotations, a Model the API server refuses). */
  problems?: string[];
  /** The Deployment's spec.replicas; undefined while the Deployment is not seen. */
  deploymentReplicas?: number;
  /** Live pods of the revision whose containers are up (kubelet Ready). */
  podsUp: number;
  sks?: { status?: { serviceName?: string; privateServiceName?: string } };
  /** `config-autoscaler`'s defaults (min-scale, initial-scale); Knative's own when absent. */
  defaults?: KnativeDefaults;
  now: number;
}

export function podAutoscalerStatus(o: PaObservation): PodAutoscalerStatus {
  const previous = o.pa.status?.conditions ?? [];
  const at = (type: string, status: KnativeCondition["status"]) => {
    const before = previous.find((c) => c.type === type);
    return before && before.status === status && before.lastTransitionTime
      ? before.lastTransitionTime
      : new Date(o.now).toISOString().replace(/\.\d+Z$/, "Z");
  };
  const condition = (
    type: string,
    status: KnativeCondition["status"],
    reason?: string,
    message?: string,
  ): KnativeCondition => ({
    type,
    status,
    ...(reason ? { reason } : {}),
    ...(message ? { message } : {}),
    lastTransitionTime: at(type, status),
  });

  const serviceName = o.sks?.status?.serviceName;
  const privateServiceName = o.sks?.status?.privateServiceName;

  const threshold = initializedAt(o.pa, o.defaults);
  const wasInitialized = previous.some((c) => c.type === "ScaleTargetInitialized" && c.status === "True");
  // A revision whose settings are invalid has no Model, so nothing runs its pods: the pods Knative
  // started for its initial scale do not make it initialized (else the Revision would be Ready and
  // the Route would move the Service's traffic to a revision Snooze cannot route).
  const invalid = o.problems !== undefined && o.problems.length > 0;
  const initialized = wasInitialized || (!invalid && serviceName !== undefined && o.podsUp >= threshold);
  const active = activeCondition(o, initialized);
  const dependents: KnativeCondition[] = [
    condition("Active", ...active),
    initialized
      ? condition("ScaleTargetInitialized", "True")
      : invalid
        ? condition("ScaleTargetInitialized", "False", "InvalidSettings", invalidSettings(o.problems!))
        : condition(
            "ScaleTargetInitialized",
            "Unknown",
            "Initializing",
            `waiting for ${threshold} pod${threshold === 1 ? "" : "s"} to be up (${o.podsUp} up)`,
          ),
    serviceName && privateServiceName
      ? condition("SKSReady", "True")
      : condition("SKSReady", "Unknown", "NotReady", "SKS Services are not ready yet"),
  ];
  const failed = dependents.find((c) => c.status === "False");
  const unknown = dependents.find((c) => c.status === "Unknown");
  const worst = failed ?? unknown;
  const ready = worst
    ? condition("Ready", worst.status, worst.reason, worst.message)
    : condition("Ready", "True");
  return {
    ...(o.pa.metadata.generation !== undefined ? { observedGeneration: o.pa.metadata.generation } : {}),
    conditions: [...dependents, ready].sort((a, b) => a.type.localeCompare(b.type)),
    ...(serviceName ? { serviceName } : {}),
    ...(privateServiceName ? { metricsServiceName: privateServiceName } : {}),
    ...(o.deploymentReplicas !== undefined ? { desiredScale: o.deploymentReplicas } : {}),
    actualScale: o.podsUp,
  };
}

type Verdict = [KnativeCondition["status"], string?, string?];

const invalidSettings = (problems: readonly string[]) =>
  `Snooze runs no pod of this revision: ${problems.join("; ")}. Fix it in a new revision.`;

function activeCondition(o: PaObservation, initialized: boolean): Verdict {
  if (o.problems && o.problems.length > 0) return ["False", "InvalidSettings", invalidSettings(o.problems)];
  const ready = o.model?.conditions?.find((c) => c.type === "Ready");
  switch (o.model?.phase) {
    case "Ready":
      return ["True"];
    case "Waking":
      return ["Unknown", "Waking", ready?.message ?? "a pod is waking"];
    case "Starting": {
      // Before the initial scale, a pod kept after its start failed (keepFailedStarts): Unknown,
      // not False, with why. Knative marks a revision failed as soon as its PA is not Ready before
      // the initial scale; left Unknown, the pod may still come up, and past its progress
      // deadline Knative's revision reconciler reports the kubelet's reason itself.
      const failure = initialized
        ? undefined
        : o.model.conditions?.find((c) => c.type === "ActivationFailed" && c.status === "True");
      if (!failure?.message)
        return ["Unknown", "Queued", "Requests to the target are being held as pods start."];
      // Once the kept pod is let go (the Deployment asked for none), the failure is final: False
      // now, from the scale Snooze wrote, not later from the Model. Knative's revision reconciler
      // reads the Deployment's Progressing True (complete at zero) as resources available, and a
      // PA still Unknown then would turn the failed Revision back to Unknown "Deploying".
      return o.deploymentReplicas === 0
        ? ["False", "ActivationFailed", failure.message]
        : ["Unknown", "ActivationFailed", failure.message];
    }
    case "Failed":
      return ["False", "ActivationFailed", ready?.message ?? "the last activation failed"];
    case "Asleep":
      // The Model's status is written after the Deployment scales: no pod left is no pod asleep.
      if (o.podsUp === 0 && (o.deploymentReplicas ?? 0) === 0)
        return ["False", "NoTraffic", "The target is not receiving traffic."];
      return ["False", ready?.reason ?? "Asleep", `${ready?.message ?? "asleep"}; a request wakes one`];
    case "Cold":
      return ["False", "NoTraffic", "The target is not receiving traffic."];
    default:
      // No Model status yet: the pods Knative created are starting, or there are none.
      return (o.deploymentReplicas ?? 0) > 0
        ? ["Unknown", "Queued", "Requests to the target are being held as pods start."]
        : ["False", "NoTraffic", "The target is not receiving traffic."];
  }
}

/**
 * Pods that must be up before the scale target counts as initialized (Knative's activeThreshold):
 * min-scale (the annotation, else config-autoscaler's; none while unreachable) or initial-scale
 * (the annotation, else config-autoscaler's; an annotation of 0 only with
 * `allow-zero-initial-scale`), the larger.
 */
export function initializedAt(pa: PodAutoscaler, defaults: KnativeDefaults = knativeDefaults): number {
  const number = (text: string | undefined) =>
    text !== undefined && /^\d+$/.test(text) ? Number(text) : undefined;
  const min =
    pa.spec?.reachability === "Unreachable"
      ? 0
      : (number(knativeAnnotation(pa.metadata.annotations, "minScale")) ?? defaults.minScale);
  const annotated = number(knativeAnnotation(pa.metadata.annotations, "initialScale"));
  const initial =
    annotated === undefined || (annotated === 0 && !defaults.allowZeroInitialScale)
      ? defaults.initialScale
      : annotated;
  return Math.max(min, initial);
}

/** Whether two statuses say the same (so nothing is written); key order and extra fields aside. */
export function sameStatus(a: PodAutoscalerStatus | undefined, b: PodAutoscalerStatus): boolean {
  const norm = (s: PodAutoscalerStatus | undefined) =>
    JSON.stringify([
      s?.observedGeneration,
      s?.serviceName,
      s?.metricsServiceName,
      s?.desiredScale,
      s?.actualScale,
      [...(s?.conditions ?? [])]
        .sort((x, y) => x.type.localeCompare(y.type))
        .map((c) => [c.type, c.status, c.reason ?? "", c.message ?? "", c.lastTransitionTime]),
    ]);
  return norm(a) === norm(b);
}
