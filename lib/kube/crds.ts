import { stringify } from "yaml";
import type { z } from "zod";
import { formatDuration } from "../duration.ts";
import { builtinTierDefaults } from "../settings/model.ts";
import { builtinSlotDefaults } from "../settings/slot.ts";
import { group, version } from "./api-group.ts";
import { modelSpec, modelStatus } from "./model-resource.ts";
import { slotSpec, slotStatus } from "./slot-resource.ts";
import { type JSONSchema, structuralSchema } from "./structural-schema.ts";

/**
 * The CustomResourceDefinitions of config/crd/, built from the zod schemas so the API validates
 * exactly what the code parses. `hack/gen-crds.ts` writes them; a unit test checks that the
 * committed files are what this produces.
 */

interface CrdParts {
  kind: string;
  plural: string;
  shortNames: string[];
  description: string;
  spec: z.ZodType;
  status: z.ZodType;
  /** Built-in values of settings the schema leaves unset (resolved by Snooze, not defaulted here). */
  builtinDefaults: Record<string, unknown>;
  specRequired: boolean;
  subresources: Record<string, unknown>;
  printerColumns: Record<string, unknown>[];
}

export function modelCrd(): JSONSchema {
  return crd({
    kind: "Model",
    plural: "models",
    shortNames: ["snm"],
    description:
      "A served model in front of a Deployment, StatefulSet or Knative Service. Snooze puts its idle replicas to sleep (vLLM sleep mode) and wakes them when requests arrive. HPA and KEDA scale it through the scale subresource, which counts ready and warming replicas.",
    spec: modelSpec,
    status: modelStatus,
    builtinDefaults: builtinTierDefaults,
    specRequired: true,
    subresources: {
      status: {},
      scale: {
        specReplicasPath: ".spec.replicas",
        statusReplicasPath: ".status.replicas",
        labelSelectorPath: ".status.selector",
      },
    },
    printerColumns: [
      { name: "Model", type: "string", jsonPath: ".spec.model", priority: 1 },
      { name: "Ready", type: "integer", jsonPath: ".status.readyReplicas" },
      { name: "Warming", type: "integer", jsonPath: ".status.warmingReplicas" },
      { name: "Sleeping", type: "integer", jsonPath: ".status.sleepingReplicas" },
      { name: "Phase", type: "string", jsonPath: ".status.phase" },
      { name: "Slot", type: "string", jsonPath: ".spec.slot", priority: 1 },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  });
}

export function slotCrd(): JSONSchema {
  return crd({
    kind: "Slot",
    plural: "slots",
    shortNames: ["sns"],
    description:
      "One exclusive accelerator (a GPU or GPU group) shared by several Models that name it in spec.slot. At most one member is resident at a time; the policy decides who is next.",
    spec: slotSpec,
    status: slotStatus,
    builtinDefaults: builtinSlotDefaults,
    specRequired: false,
    subresources: { status: {} },
    printerColumns: [
      { name: "Policy", type: "string", jsonPath: ".spec.policy" },
      { name: "Resident", type: "string", jsonPath: ".status.resident" },
      { name: "Swaps", type: "integer", jsonPath: ".status.swapCount" },
      { name: "Age", type: "date", jsonPath: ".metadata.creationTimestamp" },
    ],
  });
}

function crd(parts: CrdParts): JSONSchema {
  const spec = withBuiltinDefaults(structuralSchema(parts.spec), parts.builtinDefaults);
  const status = structuralSchema(parts.status);
  status.description ??= `The observed state of the ${parts.kind}, written by the Snooze autoscaler.`;
  return {
    apiVersion: "apiextensions.k8s.io/v1",
    kind: "CustomResourceDefinition",
    metadata: { name: `${parts.plural}.${group}` },
    spec: {
      group,
      names: {
        kind: parts.kind,
        listKind: `${parts.kind}List`,
        plural: parts.plural,
        singular: parts.kind.toLowerCase(),
        shortNames: parts.shortNames,
        categories: ["snooze"],
      },
      scope: "Namespaced",
      versions: [
        {
          name: version,
          served: true,
          storage: true,
          subresources: parts.subresources,
          additionalPrinterColumns: parts.printerColumns,
          schema: {
            openAPIV3Schema: {
              description: parts.description,
              type: "object",
              properties: {
                apiVersion: {
                  description: "The versioned schema of this representation of an object.",
                  type: "string",
                },
                kind: { description: "The REST resource this object represents.", type: "string" },
                metadata: { type: "object" },
                spec: spec,
                status: status,
              },
              ...(parts.specRequired ? { required: ["spec"] } : {}),
            },
          },
        },
      ],
    },
  };
}

/**
 * Settings shared with snooze.yaml stay unset when not written, so the autoscaler resolves them the
 * same way everywhere (object, then its defaults, then built-ins); their built-in value goes into
 * the description, where `kubectl explain` shows it.
 */
function withBuiltinDefaults(schema: JSONSchema, defaults: Record<string, unknown>): JSONSchema {
  const properties = schema.properties as Record<string, JSONSchema>;
  for (const [name, property] of Object.entries(properties)) {
    const value = defaults[name];
    if (value === undefined || property.default !== undefined) continue;
    if (/\bdefault\b/i.test(String(property.description ?? ""))) continue; // already says it
    const shown = builtinText(name, value, property);
    if (shown === undefined) continue;
    property.description = `${String(property.description ?? "").replace(/\.?$/, ".")} Default: ${shown}.`;
  }
  return schema;
}

function builtinText(name: string, value: unknown, property: JSONSchema): string | undefined {
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.join(", ");
  if (typeof value === "number" && property.type === "string") {
    if (name === "hostMemory") return value === 0 ? "0 (not counted)" : String(value);
    return value === Number.POSITIVE_INFINITY ? "never" : formatDuration(value);
  }
  return String(value);
}

/** The YAML file for one CRD, with a header that says where it comes from. */
export function crdYaml(definition: JSONSchema): string {
  const header = [
    "# Generated by hack/gen-crds.ts from the zod schemas in lib/settings and lib/kube. Do not edit:",
    "# change the schema and run `node_modules/.bin/node hack/gen-crds.ts`.",
  ].join("\n");
  return `${header}\n${stringify(definition, { lineWidth: 0, aliasDuplicateObjects: false })}`;
}

/** Every generated file under config/crd/, by file name. */
export function crdFiles(): Record<string, string> {
  return {
    "snooze.dev_models.yaml": crdYaml(modelCrd()),
    "snooze.dev_slots.yaml": crdYaml(slotCrd()),
  };
}
