import { group } from "../lib/kube/api-group.ts";
import { maxReplicasCapWarning, modelCountCapWarning } from "./messages.ts";
import { integerAt, stringAt } from "./object-path.ts";
import { modelSlot } from "./slot-members.ts";

/**
 * The Model's `spec.maxReplicas` is a bound Snooze never exceeds, and an HPA or KEDA does not know
 * it: without a word they would ask for more and see fewer run. These warnings say so when the
 * count or the scaler is written; the Model's `ReplicasCapped` condition says it while it lasts.
 */

export type ScalerKind = "HorizontalPodAutoscaler" | "ScaledObject";

/** KEDA's default maxReplicaCount when a ScaledObject leaves it out. */
const kedaDefaultMax = 100;

/** The Model an HPA or ScaledObject scales, and the most replicas it may ask for (and in which field). */
export function scalerTarget(
  kind: ScalerKind,
  scaler: unknown,
): { model: string; asked: number; field: string } | undefined {
  const apiVersion = stringAt(scaler, "spec", "scaleTargetRef", "apiVersion") ?? "";
  const name = stringAt(scaler, "spec", "scaleTargetRef", "name");
  if (stringAt(scaler, "spec", "scaleTargetRef", "kind") !== "Model" || !name) return undefined;
  if (apiVersion.split("/")[0] !== group) return undefined;
  if (kind === "HorizontalPodAutoscaler") {
    const asked = integerAt(scaler, "spec", "maxReplicas");
    return asked === undefined ? undefined : { model: name, asked, field: "spec.maxReplicas" };
  }
  return {
    model: name,
    asked: integerAt(scaler, "spec", "maxReplicaCount") ?? kedaDefaultMax,
    field: "spec.maxReplicaCount",
  };
}

/** A Model's own bound, as the API server defaults it (1). */
const maxReplicasOf = (model: unknown) => integerAt(model, "spec", "maxReplicas") ?? 1;

/** Warnings for an HPA or ScaledObject that may ask a Model for more than its maxReplicas. */
export function scalerBoundsWarnings(
  kind: ScalerKind,
  scaler: unknown,
  model: unknown | undefined,
): string[] {
  const target = scalerTarget(kind, scaler);
  if (!target || model === undefined) return [];
  const max = maxReplicasOf(model);
  if (target.asked <= max) return [];
  const name = stringAt(scaler, "metadata", "name") ?? "";
  return [
    maxReplicasCapWarning({ kind, name }, target.field, target.asked, target.model, max, modelSlot(model)),
  ];
}

/** A warning for a Model whose spec.replicas (written directly or through /scale) is above its maxReplicas. */
export function modelCountWarnings(
  name: string,
  model: unknown | undefined,
  replicas = integerAt(model, "spec", "replicas"),
): string[] {
  if (model === undefined) return [];
  const max = maxReplicasOf(model);
  return replicas !== undefined && replicas > max
    ? [modelCountCapWarning(name, replicas, max, modelSlot(model))]
    : [];
}
