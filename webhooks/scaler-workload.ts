import { apiVersion as modelApiVersion } from "../lib/kube/api-group.ts";
import { scalerTargetsModelWorkloadWarning } from "./messages.ts";
import { stringAt } from "./object-path.ts";
import type { ScalerKind } from "./scaler-bounds.ts";

/**
 * The workload an HPA or ScaledObject scales directly, when it is a Deployment or StatefulSet (the
 * kinds a Model's `spec.workloadRef` names).
 */
export function scaledWorkload(
  scaler: unknown,
): { kind: "Deployment" | "StatefulSet"; name: string } | undefined {
  const apiVersion = stringAt(scaler, "spec", "scaleTargetRef", "apiVersion") ?? "";
  const kind = stringAt(scaler, "spec", "scaleTargetRef", "kind");
  const name = stringAt(scaler, "spec", "scaleTargetRef", "name");
  if (!name || (kind !== "Deployment" && kind !== "StatefulSet")) return undefined;
  // KEDA defaults scaleTargetRef.apiVersion to apps/v1; an HPA names it.
  if (apiVersion !== "" && apiVersion.split("/")[0] !== "apps") return undefined;
  return { kind, name };
}

/**
 * Warnings for an HPA or ScaledObject whose scaleTargetRef is a Model's workload instead of the
 * Model: Snooze sets that workload's replicas itself (it starts pods for held requests and stops
 * sleepers), so the scaler and Snooze would fight over the count, the scaler starting pods Snooze
 * stopped and removing the ones it woke. It scales the Model's scale subresource instead, whose
 * `spec.replicas` is the awake replicas wanted (docs/autoscaling.md). `models`: the Models in the
 * scaler's namespace that name the workload.
 */
export function scalerWorkloadWarnings(kind: ScalerKind, scaler: unknown, models: unknown[]): string[] {
  const workload = scaledWorkload(scaler);
  if (!workload || models.length === 0) return [];
  const scalerName = stringAt(scaler, "metadata", "name") ?? "";
  return models.map((model) =>
    scalerTargetsModelWorkloadWarning(
      { kind, name: scalerName },
      workload,
      stringAt(model, "metadata", "name") ?? "",
      modelApiVersion,
    ),
  );
}
