import { z } from "zod";
import { learningSnapshot } from "../learning-snapshot.ts";
import { type Tier, tiers } from "../replica-event.ts";
import { duration, kubeSlotName, modelId } from "../settings/fields.ts";
import { tierSettings } from "../settings/model.ts";
import type { apiVersion } from "./api-group.ts";
import { conditions } from "./condition.ts";

/**
 * The `Model` resource: one served model in front of a workload. Its spec is the tier settings of
 * snooze.yaml (the one schema in lib/settings, same names) plus what only Kubernetes needs; its
 * scale subresource (.spec.replicas, .status.replicas, .status.selector) is what HPA and KEDA read
 * and write. config/crd/ is generated from these schemas by hack/gen-crds.ts.
 */

export const workloadKinds = ["Deployment", "StatefulSet", "Service"] as const;

export const workloadRef = z
  .strictObject({
    apiVersion: z.string().min(1).meta({
      description: "apps/v1 for a Deployment or StatefulSet, serving.knative.dev/v1 for a Knative Service.",
    }),
    kind: z
      .enum(workloadKinds)
      .meta({ description: "Deployment, StatefulSet, or Service (a Knative Service)." }),
    name: z.string().min(1).max(253).meta({ description: "The workload's name, in the Model's namespace." }),
  })
  .refine(
    (ref) =>
      ref.kind === "Service"
        ? ref.apiVersion.startsWith("serving.knative.dev/")
        : ref.apiVersion === "apps/v1",
    { message: workloadRefMessage() },
  )
  .meta({
    description: "The workload that serves the model; Snooze scales it and wakes and sleeps its pods.",
    "x-kubernetes-validations": [
      {
        rule: "self.kind == 'Service' ? self.apiVersion.startsWith('serving.knative.dev/') : self.apiVersion == 'apps/v1'",
        message: workloadRefMessage(),
      },
    ],
  });

function workloadRefMessage() {
  return "a Deployment or StatefulSet is apps/v1, a Service is a Knative Service (serving.knative.dev/v1)";
}

/** A Model's own fields beside the tier settings. */
const kubeFields = {
  workloadRef,
  model: modelId.optional().meta({
    description: "The OpenAI model id clients send (the request's `model`); defaults to metadata.name.",
  }),
  servedModel: modelId.optional().meta({
    description:
      "The model name the engine serves (vLLM's --served-model-name), when it is not the id: Snooze's warm-up asks for it, and a request routed by the id or an alias reaches the engine with it. Defaults to the id. A Knative revision's Model has its revision's name as id and the name its container serves here.",
  }),
  port: z
    .int()
    .min(1)
    .max(65_535)
    .default(8000)
    .meta({ description: "The port the engine (vLLM) listens on in each pod." }),
  replicas: z
    .int()
    .min(0)
    .max(10_000)
    // Defaulted, never absent: the scale subresource answers a 500 for a missing specReplicasPath
    // (the HPA's FailedGetScale), and 0 already means "on demand" (see decideReplicas).
    .default(0)
    .meta({
      description:
        "Awake replicas wanted, written by a person, HPA or KEDA through the scale subresource; replicas above it sleep. " +
        "0 (the default): none wanted by a count, Snooze wakes one on demand and it sleeps after sleepAfter idle. " +
        "Demand keeps one awake beside a count of 0; minReplicas and maxReplicas bound it either way.",
    }),
  minReplicas: z
    .int()
    .min(0)
    .max(10_000)
    .default(0)
    .meta({ description: "Replicas kept awake even when idle; 0 lets the model sleep and go cold." }),
  minPods: z
    .int()
    .min(0)
    .max(10_000)
    .default(0)
    .meta({
      description:
        "Pods kept whatever the idle time, awake or asleep (Knative's min-scale): they sleep when idle and are never stopped, " +
        "pods above it go to zero after zeroAfter; a missing one is started. 0 lets every pod go to zero.",
    }),
  maxReplicas: z
    .int()
    .min(1)
    .max(10_000)
    .default(1)
    .meta({ description: "The most replicas Snooze runs for this model." }),
};

interface Bounds {
  minReplicas: number;
  minPods: number;
  maxReplicas: number;
}
const minAtMostMax = (s: Bounds) => s.minReplicas <= s.maxReplicas;
const minPodsAtMostMax = (s: Bounds) => s.minPods <= s.maxReplicas;

/**
 * A Model's spec as it may be written (the CRD and the webhook): its slot named as a Slot object
 * can be (`kubeSlotName`), which snooze.yaml's slot names need not be.
 */
export const modelSpec = tierSettings
  .extend({
    ...kubeFields,
    slot: kubeSlotName.optional().meta({ description: tierSettings.shape.slot.description ?? "" }),
  })
  .refine(minAtMostMax, { message: minMaxMessage(), path: ["minReplicas"] })
  .refine(minPodsAtMostMax, { message: minPodsMaxMessage(), path: ["minPods"] })
  .meta({
    description: "How the model is served and when its replicas sleep, wake and stop.",
    "x-kubernetes-validations": [
      { rule: "self.minReplicas <= self.maxReplicas", message: minMaxMessage(), fieldPath: ".minReplicas" },
      { rule: "self.minPods <= self.maxReplicas", message: minPodsMaxMessage(), fieldPath: ".minPods" },
    ],
  });

/**
 * A Model's spec as the autoscaler and the activator read it: any slot name, so a Model stored
 * before slot names were checked keeps being served after an upgrade (its next write is refused).
 */
export const storedModelSpec = tierSettings
  .extend(kubeFields)
  .refine(minAtMostMax, { message: minMaxMessage(), path: ["minReplicas"] })
  .refine(minPodsAtMostMax, { message: minPodsMaxMessage(), path: ["minPods"] });

function minMaxMessage() {
  return "minReplicas must not be greater than maxReplicas";
}

function minPodsMaxMessage() {
  return "minPods must not be greater than maxReplicas";
}

export const modelPhases = ["Cold", "Starting", "Waking", "Ready", "Asleep", "Failed"] as const;

export const replicaStatus = z.strictObject({
  pod: z.string().min(1).meta({ description: "The pod of this replica." }),
  tier: z.enum(tiers as [Tier, ...Tier[]]).meta({
    description: "cold, starting, ready, draining, asleep-1, asleep-2 or waking.",
  }),
  since: z.iso.datetime().meta({ description: "When the replica entered this tier." }),
});

export const modelStatus = z.strictObject({
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .meta({ description: "The metadata.generation this status was computed from." }),
  replicas: z.int().min(0).optional().meta({
    description: "Replicas that are ready or warming (starting or waking): what HPA reads as current.",
  }),
  readyReplicas: z.int().min(0).optional().meta({ description: "Replicas awake and routable." }),
  warmingReplicas: z
    .int()
    .min(0)
    .optional()
    .meta({ description: "Replicas starting or waking: paid for, not yet routable." }),
  sleepingReplicas: z.int().min(0).optional().meta({ description: "Replicas asleep at level 1 or 2." }),
  selector: z
    .string()
    .optional()
    .meta({ description: "Label selector of the model's pods, in string form (for the scale subresource)." }),
  phase: z.enum(modelPhases).optional().meta({
    description:
      "Summary: Ready (a replica is ready), Waking or Starting (capacity on its way), Asleep (all replicas asleep), Cold (none), Failed (the last activation failed, or the spec cannot be used: the Ready condition says why).",
  }),
  replicaTiers: z
    .array(replicaStatus)
    .optional()
    .meta({
      description: "The tier of every replica and since when.",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["pod"],
    }),
  conditions: conditions.optional(),
  retryAt: z.iso.datetime().optional().meta({
    description:
      "With the ActivationFailed condition: when the back-off after the last failure ends (or ended: it moves only with a new failure, or to the time it ended early). Activators answer requests that could not be served before then at once (503 with the reason and Retry-After).",
  }),
  lastWakeDuration: duration.optional().meta({ description: "How long the last wake took, e.g. 2.4s." }),
  lastStartDuration: duration
    .optional()
    .meta({ description: "How long the last cold start took, e.g. 95s." }),
  learning: learningSnapshot.optional(),
});

export type ModelSpecInput = z.input<typeof modelSpec>;
export type ModelSpec = z.output<typeof modelSpec>;
export type ModelStatusInput = z.input<typeof modelStatus>;

/** A Model object as the API serves it (status in its written form). */
export interface ModelResource {
  apiVersion: typeof apiVersion;
  kind: "Model";
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  spec: ModelSpecInput;
  status?: ModelStatusInput;
}
