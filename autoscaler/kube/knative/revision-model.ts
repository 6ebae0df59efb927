import { knativeAutoscaling, podAutoscalers } from "../../../lib/knative/autoscaler-class.ts";
import { apiVersion } from "../../../lib/kube/api-group.ts";
import type { KubeObject } from "../../../lib/kube/client.ts";
import { configurationGenerationLabel, configurationLabel } from "../../../lib/kube/model-precedence.ts";
import type { ModelResource } from "../../../lib/kube/model-resource.ts";
import { servedModelOf } from "../../../lib/kube/served-model.ts";
import { modelAnnotation } from "../../../lib/settings/index.ts";
import { managedByLabel, managedByValue, specFromAnnotations } from "../workload-models.ts";
import { type KnativeDefaults, knativeDefaults } from "./autoscaler-config.ts";
import { goDuration } from "./go-duration.ts";

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
 *   Absent, `config-autoscaler`'s `stable-window` when the ConfigMap sets one.
 * - `scale-to-zero-pod-retention-period` (how long the last pod stays once the revision is idle)
 *   → `zeroAfter`: how long a pod stays, asleep, before it is stopped. Absent, the ConfigMap's key
 *   of the same name when it sets one.
 * - `min-scale` (pods the revision keeps) → `minPods`: that many pods stay, asleep when idle,
 *   and the pods above it follow the ladder to zero. Absent, `config-autoscaler`'s `min-scale`.
 *   None while the revision is unreachable (no route sends it traffic: an old revision after a
 *   rollout), as the KPA ignores min-scale then; reachable again (or Unknown), it applies again.
 * - `max-scale` (pods at most; 0 = no limit) → `maxReplicas`; absent, `config-autoscaler`'s
 *   `max-scale`; 0 there too, Snooze's default of 1, or `min-scale` when that is more (Knative
 *   would run that many).
 * - `target` (requests per pod the KPA aims at) has no Model field: Snooze adds a pod for held
 *   demand and keeps each awake until idle `sleepAfter`; it does not split load by a target.
 * - the revision's `containerConcurrency` (a hard limit per pod) → `concurrency`.
 * - `initial-scale` has no Model field: Knative creates the Deployment with that many pods, and
 *   the PodAutoscaler's scale target is initialized once that many are up (pa-status.ts).
 * A `snooze.dev/*` annotation for the same setting wins; Knative's webhook validated its own keys,
 * so a value it would refuse is left out here rather than guessed (the cluster default applies, as
 * in the KPA).
 */
export function knativeSettings(
  annotations: Record<string, string> | undefined,
  containerConcurrency?: number,
  scope: RevisionScope = {},
): Record<string, unknown> {
  const defaults = scope.defaults ?? knativeDefaults;
  const spec: Record<string, unknown> = {};
  // The annotation, else the cluster's default when config-autoscaler sets one, else Snooze's own.
  const window = knativeAnnotation(annotations, "window");
  const sleepAfter = (window && goDuration(window)) || defaults.stableWindow;
  if (sleepAfter) spec.sleepAfter = sleepAfter;
  const retention = knativeAnnotation(annotations, "retention");
  const zeroAfter = (retention && goDuration(retention)) || defaults.retention;
  if (zeroAfter) spec.zeroAfter = zeroAfter;
  // The KPA's scale bounds: the annotation, else config-autoscaler's default (0: none, no limit).
  const max =
    count(knativeAnnotation(annotations, "maxScale")) ??
    (defaults.maxScale > 0 ? defaults.maxScale : undefined);
  if (max !== undefined) spec.maxReplicas = max === 0 ? unlimited : Math.min(max, unlimited);
  const min = count(knativeAnnotation(annotations, "minScale")) ?? defaults.minScale;
  if (min > 0) {
    // Knative's webhook refuses min-scale above a max-scale other than 0; no Model goes past its max.
    const floor = Math.min(min, (spec.maxReplicas as number | undefined) ?? unlimited);
    // The room min-scale makes stays while unreachable, so the Model's max does not change with it.
    if (max === undefined && min > 1) spec.maxReplicas = floor;
    if (scope.reachability !== "Unreachable") spec.minPods = floor;
  }
  if (containerConcurrency !== undefined && containerConcurrency > 0) spec.concurrency = containerConcurrency;
  return spec;
}

/** What, besides a revision's annotations, bounds its scale as the KPA bounds it. */
export interface RevisionScope {
  /** `config-autoscaler`'s defaults; Knative's own when absent. */
  defaults?: KnativeDefaults;
  /** The PA's `spec.reachability`: `Unreachable` drops min-scale (Knative's ScaleBounds). */
  reachability?: string;
}

/**
 * The labels that place a revision's Model among its Configuration's revisions: every revision
 * carries its template's `snooze.dev/aliases`, and they reach the newest ready one, as the Route's
 * latest traffic does (model-precedence.ts; whether it is ready, its status says). Knative copies
 * the revision's Configuration and generation onto its PA.
 */
function revisionLabels(pa: PodAutoscaler): Record<string, string> {
  const configuration = pa.metadata.labels?.[configurationLabel];
  const generation = pa.metadata.labels?.[configurationGenerationLabel];
  if (!configuration || !generation) return {};
  return { [configurationLabel]: configuration, [configurationGenerationLabel]: generation };
}

/**
 * Whether a revision is ready for its Route: its PA's scale target is initialized (Knative makes
 * the Revision Ready then; it stays so, pa-status.ts). The revision's Model says it in its status.
 */
export function revisionReady(pa: PodAutoscaler | undefined): boolean | undefined {
  if (!pa) return undefined;
  return (
    pa.status?.conditions?.some((c) => c.type === "ScaleTargetInitialized" && c.status === "True") ?? false
  );
}

export type RevisionModel =
  | { model: ModelResource & KubeObject; problems?: undefined }
  | { model?: undefined; problems: string[] };

/** The Model of a Snooze-class revision, from its PodAutoscaler and Deployment. */
export function modelForRevision(
  pa: PodAutoscaler,
  deployment?: RevisionDeployment,
  defaults?: KnativeDefaults,
): RevisionModel {
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
  const knative = knativeSettings(annotations, pa.spec?.containerConcurrency, {
    defaults,
    reachability: pa.spec?.reachability,
  });
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
        labels: { [managedByLabel]: managedByValue, ...revisionLabels(pa) },
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
