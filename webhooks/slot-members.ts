import { tierAnnotation } from "../lib/kube/pod-replica.ts";
import { type LabelSelector, selectorString as labelSelectorString } from "../lib/kube/selector.ts";
import { isAsleep, isResident, type Tier } from "../lib/replica-event.ts";
import { annotationFor, modelAnnotation } from "../lib/settings/index.ts";
import { annotationsOf, at, integerAt, isObject, stringAt } from "./object-path.ts";

/**
 * Who belongs to a slot and who is resident, read from objects as the API serves them. Pure: the
 * objects are fetched elsewhere.
 */

/** The slot setting as an annotation: the same name the autoscaler reads (`snooze.dev/slot`). */
export const slotAnnotation = annotationFor("slot");
/** Label on the pod template of slot members: what the pod webhook's objectSelector matches. */
export const slotMemberLabel = "snooze.dev/slot-member";

/** Tiers in which a replica holds the accelerator (starting, waking, ready, draining). */
const isResidentTier = (tier: unknown): tier is Tier => typeof tier === "string" && isResident(tier as Tier);

export type WorkloadKind = "Deployment" | "StatefulSet" | "Service" | "Configuration";

/**
 * A Knative Service or Configuration: Knative makes revisions from its `spec.template` (a Service
 * through the Configuration it makes), where per-revision settings go, and scales them itself.
 */
export const isKnativeKind = (kind: WorkloadKind): kind is "Service" | "Configuration" =>
  kind === "Service" || kind === "Configuration";
export type MemberKind = "Model" | WorkloadKind;

/** A Model's slot (spec.slot). */
export const modelSlot = (model: unknown) => nonEmpty(stringAt(model, "spec", "slot"));

/** A Model's OpenAI id: spec.model, else its name. */
export const modelIdOf = (model: unknown) =>
  nonEmpty(stringAt(model, "spec", "model")) ?? stringAt(model, "metadata", "name") ?? "";

/** Replicas a Model asks to keep awake: the larger of spec.replicas and spec.minReplicas. */
export function modelDesiredReplicas(model: unknown): number {
  return Math.max(integerAt(model, "spec", "replicas") ?? 0, integerAt(model, "spec", "minReplicas") ?? 0);
}

/** The tier of the Model's first resident replica (status.replicaTiers), if any. */
export function modelResidentTier(model: unknown): string | undefined {
  const tiers = at(model, "status", "replicaTiers");
  if (!Array.isArray(tiers)) return undefined;
  for (const replica of tiers) {
    const tier = isObject(replica) ? replica.tier : undefined;
    if (isResidentTier(tier)) return tier;
  }
  return undefined;
}

/** Does `model` point at this workload (spec.workloadRef)? */
export function modelReferences(model: unknown, kind: WorkloadKind, name: string): boolean {
  return (
    stringAt(model, "spec", "workloadRef", "kind") === kind &&
    stringAt(model, "spec", "workloadRef", "name") === name
  );
}

/**
 * A workload's slot: its own `snooze.dev/slot` annotation, else the slot of a Model that points
 * at it, else (Knative Services and Configurations, whose per-revision settings live there) its
 * revision template's.
 */
export function workloadSlot(
  kind: WorkloadKind,
  workload: unknown,
  referencingModels: unknown[],
): string | undefined {
  const own = nonEmpty(annotationsOf(workload)[slotAnnotation]);
  if (own) return own;
  for (const model of referencingModels) {
    const slot = modelSlot(model);
    if (slot) return slot;
  }
  if (isKnativeKind(kind)) return nonEmpty(annotationsOf(at(workload, "spec", "template"))[slotAnnotation]);
  return undefined;
}

/** The model id clients use for a workload: `snooze.dev/model`, a referencing Model's, or its name. */
export function workloadModelId(workload: unknown, referencingModels: unknown[]): string {
  const own = nonEmpty(annotationsOf(workload)[modelAnnotation]);
  if (own) return own;
  if (referencingModels.length > 0) return modelIdOf(referencingModels[0]);
  return stringAt(workload, "metadata", "name") ?? "";
}

/** spec.replicas of a Deployment or StatefulSet; the API's default is 1 when it is left out. */
export const workloadReplicas = (workload: unknown) => integerAt(workload, "spec", "replicas") ?? 1;

/**
 * Whether a member workload is resident: it has replicas and its pods are not all asleep. Pods the
 * autoscaler marked asleep-1 or asleep-2 (annotation snooze.dev/tier) do not count; replicas without
 * pods yet count as starting.
 */
export function workloadResidentTier(workload: unknown, pods: unknown[]): string | undefined {
  if (workloadReplicas(workload) <= 0 && pods.length === 0) return undefined;
  if (pods.length === 0) return "starting";
  for (const pod of pods) {
    const tier = annotationsOf(pod)[tierAnnotation];
    if (tier === undefined || !isAsleep(tier as Tier)) return tier ?? "running";
  }
  return undefined;
}

/** The label selector of a workload's pods in string form (matchLabels and matchExpressions). */
export function selectorString(workload: unknown): string | undefined {
  const selector = at(workload, "spec", "selector");
  if (!isObject(selector)) return undefined;
  return labelSelectorString(selector as LabelSelector) || undefined;
}

function nonEmpty(value: string | undefined): string | undefined {
  return value && value.trim() !== "" ? value : undefined;
}
