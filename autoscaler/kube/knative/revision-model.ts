import { parseDuration } from "../../../lib/duration.ts";
import { knativeAutoscaling, podAutoscalers } from "../../../lib/knative/autoscaler-class.ts";
import { apiVersion } from "../../../lib/kube/api-group.ts";
import type { KubeObject } from "../../../lib/kube/client.ts";
import type { ModelResource } from "../../../lib/kube/model-resource.ts";
import { servedModelOf } from "../../../lib/kube/served-model.ts";
import { modelAnnotation } from "../../../lib/settings/index.ts";
import { managedByLabel, managedByValue, specFromAnnotations } from "../workload-models.ts";

/**
 * The Model a Snooze-class revision asks for, pure. Knative copies a revision's annotations onto
 * its PodAutoscaler, so the PA carries both the `snooze.dev/*` settings and Knative's own
 * `autoscaling.knative.dev/*` keys; the revision's Deployment (the PA's scale target) is the
 * Model's workload, so the Kubernetes platform scales it through its scale subresource like any
 * Deployment. The Model is named as the revision (the PA's name), in its namespace, and owned by
 * the PA, so it goes with the revision; its id is that name, and its `servedModel` the name the
 * user container serves (`snooze.dev/model`, else its `--served-model-name` or model).
 */
export interface PodAutoscaler extends KubeObject {
  spec?: {
    scaleTargetRef?: { apiVersion?: string; kind?: string; name?: string };
    containerConcurrency?: number;
    protocolType?: string;
    reachability?: string;
  };
  status?: PodAutoscalerStatus;
}

export interface PodAutoscalerStatus {
  observedGeneration?: number;
  conditions?: KnativeCondition[];
  serviceName?: string;
  metricsServiceName?: string;
  desiredScale?: number;
  actualScale?: number;
}

/** A condition as knative.dev/pkg writes it (apis.Condition). */
export interface KnativeCondition {
  type: string;
  status: "True" | "False" | "Unknown";
  severity?: string;
  reason?: string;
  message?: string;
  lastTransitionTime?: string;
}

export interface RevisionDeployment extends KubeObject {
  spec?: {
    replicas?: number;
    template?: {
      spec?: {
        containers?: { ports?: { containerPort?: number }[]; command?: string[]; args?: string[] }[];
      };
    };
  };
}

/** Knative's keys and the aliases its `kmap.KeyPriority` accepts (the first present wins). */
const knativeKeys = {
  minScale: ["min-scale", "minScale"],
  maxScale: ["max-scale", "maxScale"],
  initialScale: ["initial-scale", "initialScale"],
  retention: ["scale-to-zero-pod-retention-period"],
  window: ["window"],
} as const;

/** Knative's default user port: a revision's container listens on $PORT, 8080 unless it names one. */
export const knativeUserPort = 8080;

/** The value of one of Knative's autoscaling annotations, by its key or an alias. */
export function knativeAnnotation(
  annotations: Record<string, string> | undefined,
  key: keyof typeof knativeKeys,
): string | undefined {
  for (const name of knativeKeys[key]) {
    const value = annotations?.[knativeAutoscaling + name]?.trim();
    if (value !== undefined && value !== "") return value;
  }
  return undefined;
}

const goUnitMs: Record<string, number> = {
  ns: 1e-6,
  us: 1e-3,
  µs: 1e-3,
  ms: 1,
  s: 1_000,
  m: 60_000,
  h: 3_600_000,
};

/** A Go duration (`time.ParseDuration`, as Knative reads its annotations) in Snooze's form. */
export function goDuration(text: string): string | undefined {
  if (parseDuration(text) !== undefined) return text;
  if (!/^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$/.test(text)) return undefined;
  let ms = 0;
  for (const [, amount, unit] of text.matchAll(/(\d+(?:\.\d+)?)(ns|us|µs|ms|s|m|h)/g))
    ms += Number(amount) * goUnitMs[unit!]!;
  return `${Math.round(ms)}ms`;
}

/** A whole number ≥ 0 as Knative parses it (ParseInt, base 10, 32 bits); undefined otherwise. */
function count(text: string | undefined): number | undefined {
  if (text === undefined || !/^\d+$/.test(text)) return undefined;
  const n = Number(text);
  return n <= 2 ** 31 - 1 ? n : undefined;
}

/** Knative allows "no limit" (max-scale 0); a Model counts at most this many replicas. */
const unlimited = 10_000;

/**
 * What Knative's annotations mean, as Model spec fields (their meaning kept; docs/knative.md):
 * - `window` (idle time before the KPA scales down) → `sleepAfter`: idle that long, a pod sleeps.
 * - `scale-to-zero-pod-retention-period` (how long the last pod stays once the revision is idle)
 *   → `zeroAfter`: how long a pod stays, asleep, before it is stopped.
 * - `min-scale` (pods the revision keeps) → `minPods`: that many pods stay, asleep when idle,
 *   and the pods above it follow the ladder to zero.
 * - `max-scale` (pods at most; 0 = no limit) → `maxReplicas`; absent, Snooze's default of 1, or
 *   `min-scale` when that is more (Knative would run that many).
 * - `target` (requests per pod the KPA aims at) has no Model field: Snooze adds a pod for held
 *   demand and keeps each awake until idle `sleepAfter`; it does not split load by a target.
 * - the revision's `containerConcurrency` (a hard limit per pod) → `concurrency`.
 * - `initial-scale` has no Model field: Knative creates the Deployment with that many pods, and
 *   the PodAutoscaler's scale target is initialized once that many are up (pa-status.ts).
 * A `snooze.dev/*` annotation for the same setting wins; Knative's webhook validated its own keys,
 * so a value it would refuse is left out here rather than guessed.
 */
export function knativeSettings(
  annotations: Record<string, string> | undefined,
  containerConcurrency?: number,
): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  const window = knativeAnnotation(annotations, "window");
  const sleepAfter = window && goDuration(window);
  if (sleepAfter) spec.sleepAfter = sleepAfter;
  const retention = knativeAnnotation(annotations, "retention");
  const zeroAfter = retention && goDuration(retention);
  if (zeroAfter) spec.zeroAfter = zeroAfter;
  const max = count(knativeAnnotation(annotations, "maxScale"));
  if (max !== undefined) spec.maxReplicas = max === 0 ? unlimited : Math.min(max, unlimited);
  const min = count(knativeAnnotation(annotations, "minScale"));
  if (min !== undefined && min > 0) {
    // Knative's webhook refuses min-scale above a max-scale other than 0; no Model goes past its max.
    spec.minPods = Math.min(min, (spec.maxReplicas as number | undefined) ?? unlimited);
    if (max === undefined && min > 1) spec.maxReplicas = spec.minPods;
  }
  if (containerConcurrency !== undefined && containerConcurrency > 0) spec.concurrency = containerConcurrency;
  return spec;
}

export type RevisionModel =
  | { model: ModelResource & KubeObject; problems?: undefined }
  | { model?: undefined; problems: string[] };

/** The Model of a Snooze-class revision, from its PodAutoscaler and Deployment. */
export function modelForRevision(pa: PodAutoscaler, deployment?: RevisionDeployment): RevisionModel {
  const annotations = pa.metadata.annotations ?? {};
  const own = specFromAnnotations(annotations);
  if (!own.spec) return { problems: own.problems };
  const target = pa.spec?.scaleTargetRef;
  if (target?.apiVersion !== "apps/v1" || target.kind !== "Deployment" || !target.name)
    return {
      problems: [
        `spec.scaleTargetRef: ${JSON.stringify(target ?? null)}: Snooze scales a revision's apps/v1 Deployment`,
      ],
    };
  const knative = knativeSettings(annotations, pa.spec?.containerConcurrency);
  // Snooze's own annotation for a setting wins over Knative's key that maps to it.
  const settings: Record<string, unknown> = { ...knative, ...own.spec };
  // Knative puts the user container first and its queue-proxy after it.
  const container = deployment?.spec?.template?.spec?.containers?.[0];
  const port = container?.ports?.[0]?.containerPort ?? knativeUserPort;
  const name = pa.metadata.name;
  // The Model's id is the revision's name, unique per revision: the activator's routes and the
  // autoscaler's controllers are keyed by it, and a KIngress split names the revision. What the
  // engine serves (several revisions of a Service serve the same) is its servedModel.
  const served = annotations[modelAnnotation]?.trim() || servedModelOf(container);
  return {
    model: {
      apiVersion,
      kind: "Model",
      metadata: {
        name,
        namespace: pa.metadata.namespace,
        labels: { [managedByLabel]: managedByValue },
        ownerReferences: [
          {
            apiVersion: `${podAutoscalers.group}/${podAutoscalers.version}`,
            kind: podAutoscalers.kind,
            name,
            uid: pa.metadata.uid ?? "",
            controller: true,
          },
        ],
      },
      spec: {
        workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: target.name },
        ...(served && served !== name ? { servedModel: served } : {}),
        port,
        ...settings,
      },
    },
  };
}
