import { z } from "zod";

/** A status condition in the shape of Kubernetes' metav1.Condition, so kubectl and tools read it. */
export const condition = z.strictObject({
  type: z
    .string()
    .min(1)
    .max(316)
    .meta({ description: "The aspect this condition describes, in CamelCase (e.g. Ready, Degraded)." }),
  status: z.enum(["True", "False", "Unknown"]).meta({ description: "True, False or Unknown." }),
  reason: z
    .string()
    .max(1024)
    .optional()
    .meta({ description: "Why the condition last changed: a CamelCase word for machines." }),
  message: z
    .string()
    .max(32768)
    .optional()
    .meta({ description: "Why the condition last changed, for people." }),
  lastTransitionTime: z.iso.datetime().optional().meta({ description: "When the status last changed." }),
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .meta({ description: "The metadata.generation the condition was computed from." }),
});

export type Condition = z.output<typeof condition>;

/** Conditions keyed by type, as Kubernetes lists them. */
export const conditions = z.array(condition).meta({
  description: "Observations of the object's state, one per type.",
  "x-kubernetes-list-type": "map",
  "x-kubernetes-list-map-keys": ["type"],
});
