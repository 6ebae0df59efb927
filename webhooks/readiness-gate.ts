import { ownedByRevision } from "../lib/knative/autoscaler-class.ts";
import { awakeCondition } from "../lib/kube/pod-replica.ts";
import type { JsonPatch } from "./json-patch.ts";
import { pointer } from "./json-patch.ts";
import { at, isObject } from "./object-path.ts";
import { isKnativeKind, type WorkloadKind } from "./slot-members.ts";

/**
 * The readiness gate on a model workload's pod template, pure and idempotent: a Model's pods carry
 * `readinessGates: [{conditionType: snooze.dev/awake}]`, so a pod is Ready only while the autoscaler
 * says its engine is awake (vLLM's /health answers 200 while asleep, so the probe alone cannot
 * tell). A workload that is no longer a model's loses the gate, or its pods would never be Ready.
 * Knative Services are left alone: Knative's own webhook refuses readinessGates in a revision. So
 * is a revision's Deployment (Knative's): with the gate, a revision whose pods all sleep would have
 * no available pod, and Knative would mark the Revision's resources unavailable.
 */
export function gateWorkload(kind: WorkloadKind, workload: unknown, isModel: boolean): JsonPatch {
  if (isKnativeKind(kind)) return [];
  if (ownedByRevision(at(workload, "metadata", "ownerReferences"))) return [];
  const podSpec = at(workload, "spec", "template", "spec");
  if (!isObject(podSpec)) return [];
  const gates = Array.isArray(podSpec.readinessGates) ? (podSpec.readinessGates as unknown[]) : undefined;
  const ours = (gates ?? []).flatMap((g, i) =>
    isObject(g) && g.conditionType === awakeCondition ? [i] : [],
  );
  const path = ["spec", "template", "spec", "readinessGates"];
  if (isModel) {
    if (ours.length > 0) return [];
    const gate = { conditionType: awakeCondition };
    return gates === undefined
      ? [{ op: "add", path: pointer(...path), value: [gate] }]
      : [{ op: "add", path: pointer(...path, "-"), value: gate }];
  }
  // Every copy goes (the apiserver takes a gate written twice): one left behind keeps the pods
  // from ever being Ready. From the last, so each index still points where it did.
  return ours.reverse().map((index) => ({ op: "remove", path: pointer(...path, index) }));
}
