import {
  builtinTierDefaults,
  explicitTierKeys,
  type ModelConfig,
  type SlotConfig,
} from "../settings/index.ts";
import { builtinSlotDefaults } from "../settings/slot.ts";
import type { KubeObject } from "./client.ts";
import { modelPrecedence, type RevisionOrder, revisionOrder } from "./model-precedence.ts";
import { type ModelResource, type ModelSpec, storedModelSpec } from "./model-resource.ts";
import { type SlotResource, storedSlotSpec } from "./slot-resource.ts";

/** A Model as the Kubernetes components use it: its settings resolved, and where it lives. */
export interface KubeModel {
  /** `namespace/name` of the Model object. */
  key: string;
  namespace: string;
  name: string;
  uid?: string;
  /** Of Models serving one id, the lowest serves it (`modelPrecedence`: the oldest). */
  precedence: string;
  /** For the Model of a Knative revision: its place among its Configuration's revisions. */
  revision?: RevisionOrder;
  /** The OpenAI model id and tier settings, exactly as local mode resolves a model of snooze.yaml. */
  config: ModelConfig;
  spec: ModelSpec;
}

function defined<T extends object>(object: T): Partial<T> {
  return Object.fromEntries(Object.entries(object).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * Parses a Model's spec with the one schema (the CRD validated it already; this converts durations
 * and sizes) and fills in the built-in defaults: the same resolution as a model of snooze.yaml.
 * Undefined when the spec does not parse (an object written before a schema change).
 */
export function modelFromResource(resource: ModelResource & KubeObject): KubeModel | { error: string } {
  const parsed = storedModelSpec.safeParse(resource.spec);
  if (!parsed.success)
    return { error: parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ") };
  const spec = parsed.data;
  const {
    workloadRef: _w,
    model,
    servedModel,
    port,
    replicas: _r,
    minReplicas: _min,
    minPods: _pods,
    maxReplicas: _max,
    ...tier
  } = spec;
  const namespace = resource.metadata.namespace ?? "default";
  const config: ModelConfig = {
    ...builtinTierDefaults,
    ...defined(tier),
    id: model ?? resource.metadata.name,
    ...(servedModel !== undefined && servedModel !== (model ?? resource.metadata.name)
      ? { servedModel }
      : {}),
    command: [],
    env: {},
    port,
    explicit: explicitTierKeys(tier),
  };
  const revision = revisionOrder(resource);
  return {
    key: `${namespace}/${resource.metadata.name}`,
    namespace,
    name: resource.metadata.name,
    uid: resource.metadata.uid,
    precedence: modelPrecedence(resource.metadata),
    ...(revision ? { revision } : {}),
    config,
    spec,
  };
}

/** A Slot's settings resolved like a slot of snooze.yaml; built-in defaults when no Slot object exists. */
export function slotConfigFrom(name: string, resource?: SlotResource): SlotConfig {
  const parsed = storedSlotSpec.safeParse(resource?.spec ?? {});
  return { ...builtinSlotDefaults, ...(parsed.success ? defined(parsed.data) : {}), name };
}
