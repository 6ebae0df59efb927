import { autoscalerClass, classAnnotation } from "../lib/knative/autoscaler-class.ts";
import { asksForModel } from "../lib/settings/index.ts";
import { annotationsOf } from "./object-path.ts";
import { nameOf, validateWorkloadAnnotations } from "./settings-validation.ts";
import { allow, type Verdict } from "./verdict.ts";

/** The label Knative puts on the revisions a Configuration makes. */
const configurationLabel = "serving.knative.dev/configuration";

/** A Revision a Configuration made (its template was reviewed as the Configuration's). */
export const madeByConfiguration = (revision: unknown) =>
  labelsOf(revision)[configurationLabel] !== undefined;

const labelsOf = (object: unknown): Record<string, string> => {
  const labels = (object as { metadata?: { labels?: unknown } } | undefined)?.metadata?.labels;
  return labels && typeof labels === "object" ? (labels as Record<string, string>) : {};
};

/**
 * A Knative Revision created directly, not through a Configuration: its own `metadata.annotations`
 * are its settings (Knative copies them onto its PodAutoscaler, which Snooze reads), so they are
 * checked as a Deployment's are, in the same words, and refused when invalid (before, no webhook
 * was registered for Revisions: such a revision's settings were first seen by the autoscaler, which
 * could only fail it). Settings without Snooze's autoscaler class are said to do nothing.
 */
export function reviewDirectRevision(revision: unknown): Verdict {
  const verdict = validateWorkloadAnnotations("Revision", revision);
  if (!verdict.allowed) return verdict;
  const own = annotationsOf(revision);
  const chosen = own[classAnnotation]?.trim();
  const warnings = [...(verdict.warnings ?? [])];
  if (asksForModel(own) && chosen !== autoscalerClass)
    warnings.push(
      `Revision "${nameOf(revision)}": snooze.dev settings need ${classAnnotation}: ${autoscalerClass} in metadata.annotations (${chosen ? `it is "${chosen}"` : "it is not set"}); without it Knative scales this Revision and Snooze leaves it alone`,
    );
  return allow({ warnings });
}
