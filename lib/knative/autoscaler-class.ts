/**
 * Snooze as a Knative autoscaler class. A revision whose template carries
 * `autoscaling.knative.dev/class: snooze.dev` gets a PodAutoscaler that Snooze reconciles and the
 * KPA ignores. Knative reserves classes ending in `.knative.dev` for its own (its webhook refuses
 * any other such value), so Snooze's class is its API group.
 */
export const autoscalerClass = "snooze.dev";

/** The annotation that picks a revision's autoscaler class (Knative's `ClassAnnotationKey`). */
export const classAnnotation = "autoscaling.knative.dev/class";

/** Knative's `autoscaling.knative.dev/*` annotations keep their meaning; these are their keys. */
export const knativeAutoscaling = "autoscaling.knative.dev/";

/** Knative's PodAutoscaler and ServerlessService APIs (internal groups, served by Knative's CRDs). */
export const podAutoscalers = {
  group: "autoscaling.internal.knative.dev",
  version: "v1alpha1",
  plural: "podautoscalers",
  kind: "PodAutoscaler",
} as const;
export const serverlessServices = {
  group: "networking.internal.knative.dev",
  version: "v1alpha1",
  plural: "serverlessservices",
  kind: "ServerlessService",
} as const;

/** The label Knative puts on a revision's PodAutoscaler, Deployment and pods: the revision's name. */
export const revisionLabel = "serving.knative.dev/revision";
export const serviceLabel = "serving.knative.dev/service";

/** Whether a revision's (or its PodAutoscaler's) annotations choose Snooze's class. */
export function isSnoozeClass(annotations: Record<string, string> | undefined): boolean {
  return annotations?.[classAnnotation]?.trim() === autoscalerClass;
}

/** Whether an object's owner references name a Knative Revision (a revision's Deployment is Knative's). */
export function ownedByRevision(ownerReferences: unknown): boolean {
  return (
    Array.isArray(ownerReferences) &&
    ownerReferences.some(
      (o) =>
        typeof o === "object" &&
        o !== null &&
        o.kind === "Revision" &&
        typeof o.apiVersion === "string" &&
        o.apiVersion.startsWith("serving.knative.dev/"),
    )
  );
}
