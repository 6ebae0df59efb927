import { autoscalerClass, classAnnotation } from "../lib/knative/autoscaler-class.ts";
import { asksForModel } from "../lib/settings/index.ts";
import { annotationsOf, at } from "./object-path.ts";

/**
 * Warnings for a Knative Service whose `snooze.dev/*` settings would do nothing, pure. Snooze
 * serves a Knative Service only through its autoscaler class, and reads the settings from the
 * revision (Knative copies the revision template's annotations onto the revision and its
 * PodAutoscaler, not the Service's own). Such a Service is still admitted: Knative serves it.
 */
export function knativeClassWarnings(
  kind: "Service" | "Configuration",
  name: string,
  service: unknown,
): string[] {
  const warnings: string[] = [];
  const template = annotationsOf(at(service, "spec", "template"));
  const own = annotationsOf(service);
  const chosen = template[classAnnotation]?.trim();
  if (asksForModel(own))
    warnings.push(
      `${kind} "${name}": snooze.dev settings in metadata.annotations do not reach its revisions; put them in spec.template.metadata.annotations`,
    );
  if ((asksForModel(template) || asksForModel(own)) && chosen !== autoscalerClass)
    warnings.push(
      `${kind} "${name}": snooze.dev settings need ${classAnnotation}: ${autoscalerClass} in spec.template.metadata.annotations (${chosen ? `it is "${chosen}"` : "it is not set"}); without it Knative scales this ${kind} and Snooze leaves it alone`,
    );
  return warnings;
}
