import type { z } from "zod";
import { modelSpec } from "../lib/kube/model-resource.ts";
import { slotSpec } from "../lib/kube/slot-resource.ts";
import { allowedForm, reasonFor, showValue } from "../lib/settings/allowed-form.ts";
import {
  annotationFor,
  builtinTierDefaults,
  settingsFromAnnotations,
  type TierSettings,
  tierSettings,
  unusedSettings,
} from "../lib/settings/index.ts";
import { invalidAnnotationsMessage, invalidSpecMessage } from "./messages.ts";
import { annotationsOf, at, isObject } from "./object-path.ts";
import { isKnativeKind, type WorkloadKind } from "./slot-members.ts";
import { allow, invalid, type Verdict } from "./verdict.ts";

/**
 * Settings validation with the one zod schema (lib/settings, lib/kube): Models, Slots, and the
 * `snooze.dev/*` annotations of workloads. Every problem names the field path, the bad value and
 * the allowed form.
 */

/** One problem, already in words: `spec.sleepAfter: "soon": expected a duration like …`. */
export type Problem = string;

type Shape = Record<string, z.ZodType>;

/** zod's issues on `spec` as problems, with the value and the allowed form spelled out. */
export function specProblems(spec: unknown, issues: z.core.$ZodIssue[], shape: Shape): Problem[] {
  return issues.flatMap((issue) => {
    const path = issue.path.map(String);
    if (issue.code === "unrecognized_keys") {
      // The allowed fields are said once, with the first unknown one.
      const allowed = path.length === 0 ? `; allowed: ${Object.keys(shape).join(", ")}` : "";
      return issue.keys.map(
        (key, i) => `${["spec", ...path, key].join(".")}: unknown field${i === 0 ? allowed : ""}`,
      );
    }
    const where = ["spec", ...path].join(".");
    const value = path.reduce<unknown>(
      (node, key) => (isObject(node) ? node[key] : Array.isArray(node) ? node[Number(key)] : undefined),
      spec,
    );
    if (issue.code === "invalid_type" && value === undefined) return `${where}: is required`;
    const field = path.length === 1 ? shape[path[0]!] : undefined;
    return `${where}: ${showValue(value)}: ${reasonFor(issue, field)}`;
  });
}

export function validateModel(model: unknown): Verdict {
  const spec = at(model, "spec");
  const parsed = modelSpec.safeParse(spec);
  if (parsed.success) {
    const unused = unusedSettings(isObject(spec) ? spec : {}, { ...builtinTierDefaults, ...parsed.data });
    return allow({
      warnings: unused.map(({ key, message }) => `Model "${nameOf(model)}": spec.${key}: ${message}`),
    });
  }
  const problems = specProblems(spec, parsed.error.issues, modelSpec.shape as unknown as Shape);
  return invalid(invalidSpecMessage("Model", nameOf(model), problems));
}

export function validateSlot(slot: unknown): Verdict {
  // A Slot's spec may be left out: every setting has a default.
  const spec = at(slot, "spec") ?? {};
  const parsed = slotSpec.safeParse(spec);
  if (parsed.success) return allow();
  const problems = specProblems(spec, parsed.error.issues, slotSpec.shape as unknown as Shape);
  return invalid(invalidSpecMessage("Slot", nameOf(slot), problems));
}

/**
 * The `snooze.dev/*` annotations of a Deployment, StatefulSet, Knative Service or Configuration (for
 * the Knative kinds also those of their revision template, where per-revision settings go), or of
 * a Knative Revision created directly (its own).
 */
export function validateWorkloadAnnotations(kind: WorkloadKind | "Revision", workload: unknown): Verdict {
  const places: [string, Record<string, string>][] = [["metadata.annotations", annotationsOf(workload)]];
  if (kind !== "Revision" && isKnativeKind(kind)) {
    places.push(["spec.template.metadata.annotations", annotationsOf(at(workload, "spec", "template"))]);
  }
  const problems: Problem[] = [];
  const warnings: string[] = [];
  for (const [where, annotations] of places) {
    const { settings, problems: refused } = settingsFromAnnotations(annotations);
    if (settings)
      for (const { key, message } of unusedSettings(settings, { ...builtinTierDefaults, ...settings }))
        warnings.push(
          `${kind} "${nameOf(workload)}": ${where}["${annotationFor(key as keyof TierSettings)}"]: ${message}`,
        );
    for (const problem of refused) {
      const key = problem.annotation.replace(/^snooze\.dev\//, "");
      const camel = key.replace(/-([a-z])/g, (_, c: string) => c.toUpperCase());
      const form = allowedForm((tierSettings.shape as Shape)[camel]);
      const generic = /^Invalid input/.test(problem.message);
      const reason = generic && form ? `expected ${form}` : problem.message;
      problems.push(`${where}["${problem.annotation}"]: ${showValue(problem.value)}: ${reason}`);
    }
  }
  return problems.length === 0
    ? allow({ warnings })
    : invalid(invalidAnnotationsMessage(kind, nameOf(workload), problems));
}

export const nameOf = (object: unknown): string => {
  const name = at(object, "metadata", "name");
  const generateName = at(object, "metadata", "generateName");
  return typeof name === "string" && name ? name : typeof generateName === "string" ? `${generateName}*` : "";
};
