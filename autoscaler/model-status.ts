import { formatDuration } from "../lib/duration.ts";
import type { LeftOutAlias } from "../lib/kube/alias-holders.ts";
import type { Condition } from "../lib/kube/condition.ts";
import { revisionReadyCondition } from "../lib/kube/model-precedence.ts";
import type { ModelStatusInput, modelPhases } from "../lib/kube/model-resource.ts";
import type { LearningSnapshot } from "../lib/learning-snapshot.ts";
import { isAsleep, type Tier } from "../lib/replica-event.ts";

/** What the status of a Model is computed from. */
export interface ModelObservation {
  replicas: { pod: string; tier: Tier; since: number; podReady: boolean }[];
  /** Pods the workload asked for that do not exist yet. */
  pendingPods: number;
  selector: string;
  generation?: number;
  /**
   * The model id, and `namespace/name` of the Model that gets its requests instead of this one: an
   * older Model serves the same id (every activator routes an id to the oldest of its Models).
   */
  servedInstead?: { id: string; by: string };
  /**
   * When the Model lists aliases: those another Model has (an older one listing it too, or one
   * whose model id it is), which no request by that name reaches this one by.
   */
  aliases?: { leftOut: LeftOutAlias[] };
  /** Why the model's workload is missing (the platform's words), while it is. */
  workloadMissing?: string;
  /** The last activation failure, while it is the latest news. */
  lastError?: string;
  /**
   * With `lastError`: epoch ms when the back-off after it ends or ended (activations begin again);
   * moved to the time it ended when it ended early.
   */
  retryAt?: number;
  lastWakeMs?: number;
  lastStartMs?: number;
  /** What the controller learned of the model's traffic, kept in the status for the next leader. */
  learning?: LearningSnapshot;
  /**
   * For the Model of a Knative revision: whether the revision is ready for its Route (its PA's scale
   * target initialized), said as the `RevisionReady` condition (model-precedence.ts).
   */
  revisionReady?: boolean;
  /** The Model's `spec.replicas` (a person's, an HPA's or KEDA's count) and `spec.maxReplicas`. */
  desired?: number;
  maxReplicas?: number;
  /** The conditions written last time, so a transition time only moves when the status does. */
  previous?: Condition[];
  now: number;
}

type Phase = (typeof modelPhases)[number];

/**
 * Replicas serving (ready, pod Ready) and warming (starting, waking, or ready with the pod not Ready
 * yet; pods asked for and not there yet count as starting): the status's readyReplicas and
 * warmingReplicas, and the demand metric's capacity (demand-metric.ts).
 */
export function readyAndWarming(o: Pick<ModelObservation, "replicas" | "pendingPods">): {
  ready: number;
  warming: number;
} {
  let ready = 0;
  let warming = o.pendingPods;
  for (const r of o.replicas) {
    if (r.tier === "ready" && r.podReady) ready++;
    else if (r.tier === "ready" || r.tier === "waking" || r.tier === "starting") warming++;
  }
  return { ready, warming };
}

/**
 * The status the autoscaler publishes for a Model: counts for the scale subresource and HPA
 * (`replicas` = ready + warming), each pod's tier, a one-word phase and a Ready condition whose
 * reason says why. Pure, so the same observation always writes the same status.
 */
export function modelStatus(o: ModelObservation): ModelStatusInput {
  const { ready, warming } = readyAndWarming(o);
  let sleeping = 0;
  let draining = 0;
  let starting = o.pendingPods;
  let waking = 0;
  for (const r of o.replicas) {
    if (r.tier === "ready" && r.podReady) continue;
    if (r.tier === "ready" || r.tier === "waking") waking++;
    else if (r.tier === "starting") starting++;
    else if (isAsleep(r.tier)) sleeping++;
    else if (r.tier === "draining") draining++;
  }
  const failed = o.lastError !== undefined && ready === 0 && warming === 0;
  const [phase, reason, message]: [Phase, string, string] =
    ready > 0
      ? ["Ready", "ReplicaReady", `${ready} of ${ready + warming} awake replicas ready`]
      : waking > 0
        ? ["Waking", "Waking", `${waking} replica${waking > 1 ? "s" : ""} waking`]
        : starting > 0
          ? ["Starting", "Starting", `${starting} replica${starting > 1 ? "s" : ""} starting`]
          : o.workloadMissing !== undefined
            ? [failed ? "Failed" : "Cold", "WorkloadNotFound", o.workloadMissing]
            : failed
              ? ["Failed", "ActivationFailed", o.lastError!]
              : draining > 0
                ? ["Asleep", "Draining", "finishing in-flight requests before sleep"]
                : sleeping > 0
                  ? ["Asleep", "Asleep", `${sleeping} replica${sleeping > 1 ? "s" : ""} asleep`]
                  : ["Cold", "ScaledToZero", "no replicas"];
  // Requests for its id go to another Model: whatever its replicas do, it serves none of them.
  const serving = ready > 0 && o.servedInstead === undefined;
  const readyCondition: Condition = {
    type: "Ready",
    status: serving ? "True" : "False",
    reason: o.servedInstead !== undefined ? "ModelIdTaken" : reason,
    message: o.servedInstead !== undefined ? idTakenMessage(o.servedInstead) : message,
    lastTransitionTime: transitionTime(o.previous, "Ready", serving ? "True" : "False", o.now),
    ...(o.generation !== undefined ? { observedGeneration: o.generation } : {}),
  };
  const degraded: Condition = {
    type: "ActivationFailed",
    status: o.lastError !== undefined ? "True" : "False",
    reason: o.lastError !== undefined ? "ActivationFailed" : "NoFailure",
    message: o.lastError ?? "the last activation succeeded",
    lastTransitionTime: transitionTime(
      o.previous,
      "ActivationFailed",
      o.lastError !== undefined ? "True" : "False",
      o.now,
    ),
    ...(o.generation !== undefined ? { observedGeneration: o.generation } : {}),
  };
  const conditions = [readyCondition, degraded];
  const retryAt = failedUntil(o);
  const capped = cappedCondition(o);
  if (capped) conditions.push(capped);
  // A Model whose id another serves gets no alias either: its Ready condition says why.
  const taken = o.servedInstead === undefined ? aliasesTakenCondition(o) : undefined;
  if (taken) conditions.push(taken);
  if (o.revisionReady !== undefined) {
    const status = o.revisionReady ? "True" : "False";
    conditions.push({
      type: revisionReadyCondition,
      status,
      reason: o.revisionReady ? "ScaleTargetInitialized" : "NotInitialized",
      message: o.revisionReady
        ? "the Knative revision is ready for its Route: its aliases reach it when it is its Configuration's newest ready revision"
        : "the Knative revision is not ready yet: its Configuration's aliases reach the newest ready revision",
      lastTransitionTime: transitionTime(o.previous, revisionReadyCondition, status, o.now),
      ...(o.generation !== undefined ? { observedGeneration: o.generation } : {}),
    });
  }
  return {
    ...(o.generation !== undefined ? { observedGeneration: o.generation } : {}),
    replicas: ready + warming,
    readyReplicas: ready,
    warmingReplicas: warming,
    sleepingReplicas: sleeping,
    selector: o.selector,
    phase,
    replicaTiers: [...o.replicas]
      .sort((a, b) => a.pod.localeCompare(b.pod))
      .map((r) => ({ pod: r.pod, tier: r.tier, since: new Date(r.since).toISOString() })),
    conditions,
    ...(retryAt !== undefined ? { retryAt: new Date(retryAt).toISOString() } : {}),
    ...(o.lastWakeMs !== undefined ? { lastWakeDuration: formatDuration(o.lastWakeMs) } : {}),
    ...(o.lastStartMs !== undefined ? { lastStartDuration: formatDuration(o.lastStartMs) } : {}),
    ...(o.learning !== undefined ? { learning: o.learning } : {}),
  };
}

function idTakenMessage({ id, by }: { id: string; by: string }): string {
  return `Model ${by} is older and serves the same model id "${id}", so every request for "${id}" goes there and none to this one: give this Model another spec.model, or delete one of the two`;
}

/**
 * `AliasesTaken`: whether an alias this Model lists reaches another Model instead (activators give
 * an alias to a model id of that name first, then to the oldest Model listing it), naming each
 * and who has it. False again once every alias reaches this one (the holder went, or dropped it).
 */
function aliasesTakenCondition(o: ModelObservation): Condition | undefined {
  if (o.aliases === undefined) return undefined;
  const { leftOut } = o.aliases;
  const status = leftOut.length > 0 ? "True" : "False";
  return {
    type: "AliasesTaken",
    status,
    reason: leftOut.length > 0 ? "AliasTaken" : "AliasesServed",
    message:
      leftOut.length > 0
        ? leftOut.every((a) => a.sameConfiguration)
          ? `${leftOut.map(aliasTakenWords).join("; ")}: requests by ${leftOut.length > 1 ? "these names" : "that name"} go there, as the Route's latest traffic does`
          : `${leftOut.map(aliasTakenWords).join("; ")}: requests by ${leftOut.length > 1 ? "these names" : "that name"} go there, not here; give this Model other aliases, or take ${leftOut.length > 1 ? "them" : "it"} from the other Model`
        : "every alias of this Model reaches it",
    lastTransitionTime: transitionTime(o.previous, "AliasesTaken", status, o.now),
    ...(o.generation !== undefined ? { observedGeneration: o.generation } : {}),
  };
}

function aliasTakenWords({ alias, holder, asId, sameConfiguration }: LeftOutAlias): string {
  if (sameConfiguration)
    return `alias "${alias}" goes to revision ${holder}, the newest ready revision of the same Knative Configuration`;
  return asId
    ? `alias "${alias}" is the model id of Model ${holder}`
    : `alias "${alias}" is listed by Model ${holder} too, which is older and has it`;
}

/**
 * `ReplicasCapped`: whether the count in `spec.replicas` asks for more than `spec.maxReplicas`,
 * which Snooze never exceeds. An HPA or KEDA does not know that bound and would otherwise be
 * capped silently: its status says N while fewer run.
 */
function cappedCondition(o: ModelObservation): Condition | undefined {
  if (o.desired === undefined || o.maxReplicas === undefined) return undefined;
  const capped = o.desired > o.maxReplicas;
  const status = capped ? "True" : "False";
  return {
    type: "ReplicasCapped",
    status,
    reason: capped ? "AboveMaxReplicas" : "WithinMaxReplicas",
    message: capped
      ? `spec.replicas ${o.desired} (a person's, an HPA's or KEDA's count) is above spec.maxReplicas ${o.maxReplicas}: ` +
        `at most ${o.maxReplicas} run; raise spec.maxReplicas, or lower the HPA's maxReplicas (a ScaledObject's maxReplicaCount) to ${o.maxReplicas}`
      : `spec.replicas ${o.desired} is within spec.maxReplicas ${o.maxReplicas}`,
    lastTransitionTime: transitionTime(o.previous, "ReplicasCapped", status, o.now),
    ...(o.generation !== undefined ? { observedGeneration: o.generation } : {}),
  };
}

/**
 * When the back-off after the last failure ends or ended, while that failure is the latest news. Not
 * dropped once it passed: it changes only with a new failure or an early end, so the activators,
 * which read it, can tell the two apart, and a status write does not depend on the time.
 */
function failedUntil(o: ModelObservation): number | undefined {
  return o.lastError !== undefined ? o.retryAt : undefined;
}

/** When the condition `type` came to `status`: kept from `previous` while it stays, else `now`. */
export function transitionTime(
  previous: Condition[] | undefined,
  type: string,
  status: string,
  now: number,
): string {
  const before = previous?.find((c) => c.type === type);
  if (before && before.status === status && before.lastTransitionTime) return before.lastTransitionTime;
  return new Date(now).toISOString().replace(/\.\d+Z$/, "Z");
}
