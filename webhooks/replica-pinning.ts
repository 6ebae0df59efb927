import type { JsonPatch } from "./json-patch.ts";
import { pinnedWarning } from "./messages.ts";
import { annotationsOf, at, integerAt, labelsOf } from "./object-path.ts";
import { applyPatch, removePatch, setPatch } from "./patch-builder.ts";
import { sleepAnnotation } from "./pod-sleep-mode.ts";
import { isKnativeKind, slotAnnotation, slotMemberLabel, type WorkloadKind } from "./slot-members.ts";

/**
 * replicas=1 pinning and pod template stamping for the workloads of slot members, pure.
 *
 * - A Deployment or StatefulSet in a slot that asks for more than one replica gets spec.replicas 1
 *   and a warning that says why. A Knative Service or Configuration gets
 *   autoscaling.knative.dev/max-scale "1", min-scale at most 1 and initial-scale "0" on its
 *   revision template.
 * - The pod template carries the slot (annotation snooze.dev/slot, label snooze.dev/slot-member),
 *   so the pod webhook knows the pods of slot members and its objectSelector matches only them.
 *   A workload that leaves its slot loses both.
 */
export interface Mutation {
  patch: JsonPatch;
  warnings: string[];
}

const knativeScale = "autoscaling.knative.dev/";

export function pinWorkload(
  kind: WorkloadKind,
  workload: unknown,
  slot: string | undefined,
  /** Whether the model uses sleep mode (pod-sleep-mode.ts workloadSleeps); default yes. */
  sleeps = true,
): Mutation {
  const patch: JsonPatch = [];
  const warnings: string[] = [];
  const name = String(at(workload, "metadata", "name") ?? at(workload, "metadata", "generateName") ?? "");
  const member = { kind, name };
  const template = at(workload, "spec", "template");
  if (!slot) {
    // Not (or no longer) a member: take the stamp off the template if it is there.
    if (labelsOf(template)[slotMemberLabel] !== undefined) {
      patch.push(...removePatch(workload, ["spec", "template", "metadata", "labels", slotMemberLabel]));
      if (!isKnativeKind(kind)) {
        patch.push(...removePatch(workload, ["spec", "template", "metadata", "annotations", slotAnnotation]));
        patch.push(...removePatch(workload, templateSleep));
      }
    }
    return { patch, warnings };
  }
  if (kind === "Deployment" || kind === "StatefulSet") {
    const replicas = integerAt(workload, "spec", "replicas");
    if (replicas !== undefined && replicas > 1) {
      patch.push({ op: "replace", path: "/spec/replicas", value: 1 });
      warnings.push(pinnedWarning(member, slot, "spec.replicas", String(replicas)));
    }
  } else {
    const annotations = annotationsOf(template);
    const path = (name: string) => ["spec", "template", "metadata", "annotations", knativeScale + name];
    /**
     * Sets `key` to `value` when `tooMany` says what Knative would read is wrong. Knative reads the
     * kebab-case key, else its older camelCase name (`minScale`): a `minScale: "3"` left beside
     * Snooze's `max-scale: "1"` was refused by Knative ("max-scale=1 is less than min-scale=3",
     * found by an outside tester). A camelCase key pinned is replaced by the kebab one.
     */
    const pin = (key: string, value: string, tooMany: (written: number | undefined) => boolean) => {
      const legacy = key.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
      const written =
        knativeScale + key in annotations ? key : knativeScale + legacy in annotations ? legacy : undefined;
      const raw = written === undefined ? undefined : annotations[knativeScale + written];
      if (!tooMany(raw === undefined ? undefined : Number(raw))) return;
      if (written === legacy) patch.push(...removePatch(workload, path(legacy)));
      patch.push(...setPatch(applyLocal(workload, patch), path(key), value));
      if (written !== undefined)
        warnings.push(pinnedWarning(member, slot, `${knativeScale}${written}`, JSON.stringify(raw)));
    };
    // max-scale 0 means "no limit" to Knative; absent, none either.
    pin("max-scale", "1", (n) => n === undefined || n > 1 || n === 0);
    pin("min-scale", "1", (n) => n !== undefined && n > 1);
    // A new revision starts with no pod: Knative's default initial pod would load a second engine
    // onto the slot's GPU beside its resident (vLLM fails for want of memory, the revision never
    // gets Ready); the slot's arbiter starts it on its first request instead. Knative accepts 0
    // only with config-autoscaler's allow-zero-initial-scale: "true" (docs/knative.md).
    pin("initial-scale", "0", (n) => n !== 0);
  }
  // Stamp the template; apply the replica patches first so the paths stay valid.
  const stamped = patch.length > 0 ? applyLocal(workload, patch) : workload;
  patch.push(...setPatch(stamped, ["spec", "template", "metadata", "annotations", slotAnnotation], slot));
  const withAnnotation = applyLocal(stamped, patch.slice(-1));
  patch.push(
    ...setPatch(withAnnotation, ["spec", "template", "metadata", "labels", slotMemberLabel], "true"),
  );
  patch.push(...stampSleep(kind, applyLocal(workload, patch), sleeps));
  return { patch, warnings };
}

const templateSleep = ["spec", "template", "metadata", "annotations", sleepAnnotation];

/**
 * The pod webhook sees only the pod, and the pod only its template: a model that does not sleep
 * (`sleep: false` on the workload or its Model) says so there, or its pods got
 * --enable-sleep-mode, which vLLM refuses where sleep mode is not supported. On a Deployment or
 * StatefulSet the template's setting is Snooze's copy and goes when the model sleeps again; on a
 * Knative Service's revision template it is the user's own, so it is only added.
 */
function stampSleep(kind: WorkloadKind, workload: unknown, sleeps: boolean): JsonPatch {
  if (!sleeps) {
    if (isKnativeKind(kind) && annotationsOf(at(workload, "spec", "template"))[sleepAnnotation] !== undefined)
      return [];
    return setPatch(workload, templateSleep, "false");
  }
  return isKnativeKind(kind) ? [] : removePatch(workload, templateSleep);
}

/** A Scale (autoscaling/v1) write to a slot member's scale subresource asking for more than one. */
export function pinScale(
  scale: unknown,
  member: { kind: string; name: string },
  slot: string | undefined,
): Mutation {
  const replicas = integerAt(scale, "spec", "replicas");
  if (!slot || replicas === undefined || replicas <= 1) return { patch: [], warnings: [] };
  return {
    patch: [{ op: "replace", path: "/spec/replicas", value: 1 }],
    warnings: [pinnedWarning(member, slot, "spec.replicas (scale)", String(replicas))],
  };
}

function applyLocal(object: unknown, patch: JsonPatch): unknown {
  return patch.length === 0 ? object : applyPatch(object, patch);
}
