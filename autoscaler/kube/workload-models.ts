import { apiVersion } from "../../lib/kube/api-group.ts";
import type { KubeObject } from "../../lib/kube/client.ts";
import type { ModelResource } from "../../lib/kube/model-resource.ts";
import {
  annotationPrefix,
  asksForModel,
  modelAnnotation,
  settingsFromAnnotations,
  tierSettings,
} from "../../lib/settings/index.ts";

/**
 * Models for workloads that carry `snooze.dev/*` annotations (Deployments and StatefulSets):
 * the annotations are the same settings as a Model's spec, in kebab case, parsed by the one schema.
 * The autoscaler creates such a Model, owned by the workload (deleted with it), and deletes it when
 * the annotations go.
 */
export const managedByLabel = "app.kubernetes.io/managed-by";
export const managedByValue = "snooze-autoscaler";

export interface Workload extends KubeObject {
  spec?: {
    template?: { spec?: { containers?: { ports?: { containerPort?: number }[] }[] } };
  };
}

export type WorkloadKind = "Deployment" | "StatefulSet" | "Service";

export type WorkloadModel =
  | { model: ModelResource & KubeObject; problems?: undefined }
  | { model?: undefined; problems: string[] };

/** Whether the workload asks for a Model at all. */
export function isAnnotated(workload: Workload): boolean {
  return asksForModel(workload.metadata.annotations);
}

/**
 * The tier settings `snooze.dev/*` annotations ask for, as a Model's spec writes them, or the
 * problems (annotation, value, reason). Durations and sizes keep the form they were written in
 * ("5m", "2Gi"), as a Model's spec does.
 */
export function specFromAnnotations(
  annotations: Record<string, string>,
): { spec: Record<string, unknown>; problems?: undefined } | { spec?: undefined; problems: string[] } {
  const { settings, problems } = settingsFromAnnotations(annotations);
  if (!settings)
    return { problems: problems.map((p) => `${p.annotation}=${JSON.stringify(p.value)}: ${p.message}`) };
  const shape = tierSettings.shape as Record<string, { safeParse(value: unknown): { success: boolean } }>;
  const written: Record<string, unknown> = {};
  for (const [key, parsed] of Object.entries(settings)) {
    if (parsed === undefined) continue;
    const kebab = key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
    const raw = annotations[annotationPrefix + kebab]?.trim();
    written[key] =
      raw !== undefined && typeof parsed === "number" && shape[key]?.safeParse(raw).success ? raw : parsed;
  }
  return { spec: written };
}

/** The Model a workload's annotations describe; undefined when it has none. */
export function modelForWorkload(workload: Workload, kind: WorkloadKind): WorkloadModel | undefined {
  if (!isAnnotated(workload)) return undefined;
  const annotations = workload.metadata.annotations ?? {};
  const settings = specFromAnnotations(annotations);
  if (!settings.spec) return { problems: settings.problems };
  const written = settings.spec;
  const port = workload.spec?.template?.spec?.containers?.[0]?.ports?.[0]?.containerPort ?? 8000;
  const id = annotations[modelAnnotation]?.trim() || workload.metadata.name;
  const workloadApiVersion =
    kind === "Service" ? (workload.apiVersion ?? "serving.knative.dev/v1") : "apps/v1";
  return {
    model: {
      apiVersion,
      kind: "Model",
      metadata: {
        name: workload.metadata.name,
        namespace: workload.metadata.namespace,
        labels: { [managedByLabel]: managedByValue },
        ownerReferences: [
          {
            apiVersion: workloadApiVersion,
            kind,
            name: workload.metadata.name,
            uid: workload.metadata.uid ?? "",
            controller: true,
          },
        ],
      },
      spec: {
        workloadRef: { apiVersion: workloadApiVersion, kind, name: workload.metadata.name },
        model: id,
        port,
        ...written,
      },
    },
  };
}

/** Spec fields the API fills in when absent: the Model CRD's defaults (lib/kube/model-resource.ts). */
const defaulted: Record<string, unknown> = { port: 8000, minReplicas: 0, minPods: 0, maxReplicas: 1 };
/** Spec fields others write (HPA through the scale subresource). */
const notOurs = new Set(["replicas"]);

/**
 * Whether an existing Model still says what the workload's annotations say. A field the desired
 * spec leaves out must be at the API's default: a setting that went (a Knative revision's
 * min-scale once it is unreachable, a cluster default withdrawn) is a change.
 */
export function sameSpec(existing: Record<string, unknown>, desired: Record<string, unknown>): boolean {
  for (const [key, value] of Object.entries(desired)) {
    if (JSON.stringify(existing[key]) !== JSON.stringify(value)) return false;
  }
  for (const key of Object.keys(existing)) {
    if (key in desired || notOurs.has(key)) continue;
    if (!(key in defaulted) || JSON.stringify(existing[key]) !== JSON.stringify(defaulted[key])) return false;
  }
  return true;
}

/** Whether a Model was made by the autoscaler for this workload. */
export function ownedBy(model: KubeObject, workload: { kind: string; name: string }): boolean {
  return (
    model.metadata.labels?.[managedByLabel] === managedByValue &&
    (model.metadata.ownerReferences ?? []).some((o) => o.kind === workload.kind && o.name === workload.name)
  );
}
