import type { AdmissionRequest } from "../../../webhooks/admission.ts";

/** AdmissionReview bodies as the apiserver sends them, for tests. */
export function review(
  request: Partial<AdmissionRequest> & Pick<AdmissionRequest, "resource">,
): Record<string, unknown> {
  const kinds: Record<string, string> = {
    models: "Model",
    slots: "Slot",
    deployments: "Deployment",
    statefulsets: "StatefulSet",
    services: "Service",
    configurations: "Configuration",
    pods: "Pod",
  };
  return {
    apiVersion: "admission.k8s.io/v1",
    kind: "AdmissionReview",
    request: {
      uid: "705ab4f5-6393-11e8-b7cc-42010a800002",
      kind: {
        group: request.resource.group,
        version: request.resource.version,
        kind: request.subResource === "scale" ? "Scale" : (kinds[request.resource.resource] ?? "Thing"),
      },
      operation: "CREATE",
      userInfo: { username: "alice", groups: ["system:authenticated"] },
      namespace: "team-a",
      ...request,
    },
  };
}

export const resources = {
  models: { group: "snooze.dev", version: "v1alpha1", resource: "models" },
  slots: { group: "snooze.dev", version: "v1alpha1", resource: "slots" },
  deployments: { group: "apps", version: "v1", resource: "deployments" },
  statefulsets: { group: "apps", version: "v1", resource: "statefulsets" },
  knativeServices: { group: "serving.knative.dev", version: "v1", resource: "services" },
  knativeConfigurations: { group: "serving.knative.dev", version: "v1", resource: "configurations" },
  knativeRevisions: { group: "serving.knative.dev", version: "v1", resource: "revisions" },
  pods: { group: "", version: "v1", resource: "pods" },
  hpas: { group: "autoscaling", version: "v2", resource: "horizontalpodautoscalers" },
  scaledObjects: { group: "keda.sh", version: "v1alpha1", resource: "scaledobjects" },
};

/** A Deployment `name` scaled from 0 to 1 through its scale subresource: the write that takes a slot claim. */
export const scaleFromZero = (name: string) =>
  review({
    resource: resources.deployments,
    subResource: "scale",
    operation: "UPDATE",
    name,
    object: { spec: { replicas: 1 } },
    oldObject: { spec: { replicas: 0 } },
  });
