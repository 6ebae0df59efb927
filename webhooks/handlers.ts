import { group } from "../lib/kube/api-group.ts";
import { asksForModel } from "../lib/settings/index.ts";
import { slotDevice } from "../lib/settings/slot.ts";
import type { AdmissionRequest } from "./admission.ts";
import type { ClusterReader } from "./cluster.ts";
import { madeByConfiguration, reviewDirectRevision } from "./direct-revision.ts";
import { knativeClassWarnings } from "./knative-class.ts";
import type { MemberRef } from "./messages.ts";
import { invalidDeviceWarning, unhandledResourceWarning } from "./messages.ts";
import { annotationsOf, at, integerAt, isObject, stringAt } from "./object-path.ts";
import { mutatePod, workloadSleeps } from "./pod-sleep-mode.ts";
import { gateWorkload } from "./readiness-gate.ts";
import { pinScale, pinWorkload } from "./replica-pinning.ts";
import { modelCountWarnings, type ScalerKind, scalerBoundsWarnings, scalerTarget } from "./scaler-bounds.ts";
import { scaledWorkload, scalerWorkloadWarnings } from "./scaler-workload.ts";
import { validateModel, validateSlot, validateWorkloadAnnotations } from "./settings-validation.ts";
import { sleepModeWarnings } from "./sleep-mode-check.ts";
import { admitWithClaim, type ClaimStore, releaseClaim } from "./slot-claims.ts";
import {
  isKnativeKind,
  modelIdOf,
  modelSlot,
  slotAnnotation,
  type WorkloadKind,
  workloadModelId,
  workloadReplicas,
  workloadSlot,
} from "./slot-members.ts";
import { validateSlotModelReplicas } from "./slot-replicas.ts";
import {
  type AutoscalerIdentity,
  decideResidency,
  type Leaving,
  mayRemoveResident,
  modelIntent,
  modelLeaving,
  modelRemoval,
  type ResidencyIntent,
  requesterPod,
  type SlotState,
  scaleIntent,
  scaleLeaving,
  workloadIntent,
  workloadLeaving,
  workloadRemoval,
} from "./slot-residency.ts";
import { allow, type Verdict } from "./verdict.ts";

/**
 * The webhooks: one path each, and the glue between an admission request, what the cluster reader
 * knows, and the pure decisions. Every webhook allows what it does not handle (with a warning that
 * points at the configuration) rather than guess.
 */
export const webhookPaths = {
  "validate-models": "/validate/models",
  "validate-slots": "/validate/slots",
  "validate-workloads": "/validate/workloads",
  "validate-scale": "/validate/scale",
  "validate-scalers": "/validate/scalers",
  "mutate-workloads": "/mutate/workloads",
  "mutate-scale": "/mutate/scale",
  "mutate-pods": "/mutate/pods",
} as const;

export type WebhookName = keyof typeof webhookPaths;

export interface WebhookDeps {
  cluster: ClusterReader;
  autoscaler: AutoscalerIdentity;
  /** The slots' admission claims (see slot-claims.ts). */
  claims: ClaimStore;
  /** The clock claims are written and judged by (tests set it). */
  now?: () => number;
}

/** `signal` is aborted at the decision's deadline: nothing is written after it. */
type Handler = (
  request: AdmissionRequest,
  deps: WebhookDeps,
  signal?: AbortSignal,
) => Promise<Verdict> | Verdict;

const isModels = (r: AdmissionRequest) => r.resource.group === group && r.resource.resource === "models";
const isSlots = (r: AdmissionRequest) => r.resource.group === group && r.resource.resource === "slots";

/**
 * Deployment, StatefulSet, Knative Service or Knative Configuration, by the request's resource. A
 * Configuration is what a Service makes, and may also be applied on its own: its revision template
 * is checked and pinned as a Service's is, or a direct Configuration would make revisions no
 * webhook ever saw.
 */
function workloadKind(r: AdmissionRequest): WorkloadKind | undefined {
  const { group, resource } = r.resource;
  if (group === "apps" && resource === "deployments") return "Deployment";
  if (group === "apps" && resource === "statefulsets") return "StatefulSet";
  if (group === "serving.knative.dev" && resource === "services") return "Service";
  if (group === "serving.knative.dev" && resource === "configurations") return "Configuration";
  return undefined;
}

/** Knative Revisions: only those created directly reach the webhook (its objectSelector). */
const isRevisions = (r: AdmissionRequest) =>
  r.resource.group === "serving.knative.dev" && r.resource.resource === "revisions";

const subResource = (r: AdmissionRequest) => r.subResource ?? "";
const namespaceOf = (r: AdmissionRequest) => r.namespace ?? "";
const objectName = (r: AdmissionRequest, object: unknown) =>
  r.name || stringAt(object, "metadata", "name") || "";

function unhandled(name: WebhookName, r: AdmissionRequest): Verdict {
  const connect = r.operation === "CONNECT" ? "CONNECT of " : "";
  const resource = `${connect}${r.resource.resource}${r.subResource ? `/${r.subResource}` : ""}${r.resource.group ? `.${r.resource.group}` : ""}`;
  return allow({ warnings: [unhandledResourceWarning(name, resource)] });
}

/**
 * The residency verdict for an intent, with the Lease read only when it can matter, serialized
 * with other reviews of the slot by its admission claim: an allowed write has taken the claim.
 */
async function residency(
  request: AdmissionRequest,
  intent: ResidencyIntent | undefined,
  deps: WebhookDeps,
  signal: AbortSignal | undefined,
): Promise<Verdict> {
  if (!intent) return allow();
  const namespace = namespaceOf(request);
  const askedByAutoscaler = request.userInfo.username === deps.autoscaler.username;
  const pod = requesterPod(request.userInfo);
  const lease =
    askedByAutoscaler && pod !== undefined
      ? await deps.cluster.leaseHolder(deps.autoscaler.leaseNamespace, intent.slot)
      : undefined;
  return admitWithClaim({
    store: deps.claims,
    namespace,
    intent,
    dryRun: request.dryRun === true,
    // The autoscaler that may swap (decideResidency's rule) takes the claim whoever holds it.
    override: askedByAutoscaler && (pod === undefined || pod === lease),
    decide: async () =>
      decideResidency(
        intent,
        await deps.cluster.slotState(namespace, intent.slot),
        request.userInfo,
        deps.autoscaler,
        lease,
      ),
    now: deps.now ?? Date.now,
    ...(signal ? { signal } : {}),
  });
}

const first = (...verdicts: Verdict[]) => verdicts.find((v) => !v.allowed);

/**
 * An allowed write (not a dry run) of a member that stops asking for its slot gives back the
 * slot's admission claim if that member holds it (best effort, see releaseClaim).
 */
async function releasing(
  request: AdmissionRequest,
  verdict: Verdict,
  leaving: Leaving | undefined,
  deps: WebhookDeps,
  signal: AbortSignal | undefined,
): Promise<Verdict> {
  if (verdict.allowed && leaving && request.dryRun !== true)
    await releaseClaim(deps.claims, namespaceOf(request), leaving, signal);
  return verdict;
}

/** A Model with spec.replicas set to `replicas` (its scale subresource's view). */
const withReplicas = (model: unknown, replicas: number) => ({
  ...(isObject(model) ? model : {}),
  spec: { ...(isObject(at(model, "spec")) ? (at(model, "spec") as object) : {}), replicas },
});

/**
 * The member a scale write from 1 or more to 0 takes out of its slot, if any; its parent read only
 * then. A read that fails leaves the claim to its window (the write is not refused for it).
 */
async function scaledToZero(request: AdmissionRequest, deps: WebhookDeps): Promise<Leaving | undefined> {
  const namespace = namespaceOf(request);
  const name = request.name ?? "";
  const before = integerAt(request.oldObject, "spec", "replicas") ?? 0;
  const after = integerAt(request.object, "spec", "replicas") ?? 0;
  if (before < 1 || after >= 1) return undefined;
  try {
    if (isModels(request)) {
      // The count from the review (the cache may lag), minReplicas from the Model.
      const model =
        deps.cluster.cachedModel(namespace, name) ?? (await deps.cluster.readModel(namespace, name));
      return model ? modelLeaving(withReplicas(model, before), withReplicas(model, after)) : undefined;
    }
    const kind = workloadKind(request);
    if (kind !== "Deployment" && kind !== "StatefulSet") return undefined;
    const workload = await deps.cluster.readWorkload(namespace, kind, name);
    const models = deps.cluster.modelsReferencing(namespace, kind, name);
    const slot = workload ? workloadSlot(kind, workload, models) : undefined;
    return scaleLeaving(request.oldObject, request.object, { kind, name }, slot);
  } catch {
    return undefined;
  }
}

/**
 * A Model deleted or leaving its slot (`now` undefined: deleted). Resident as the residency rule
 * counts it: its own status first (no read), else the slot read fresh, whose `status.resident` may
 * name it before its replicas show it, else its workload (spec.workloadRef) through its pods, read
 * fresh: a Deployment or StatefulSet with replicas whose pods are not all asleep. That workload is
 * the Model's engine whether or not it carries the slot annotation itself.
 */
async function leavingSlot(
  request: AdmissionRequest,
  old: unknown,
  now: unknown | undefined,
  deps: WebhookDeps,
): Promise<Verdict> {
  const own = modelRemoval(old, now);
  const slot = modelSlot(old);
  if (!own.allowed || !slot || (now !== undefined && modelSlot(now) === slot)) return own;
  const namespace = namespaceOf(request);
  const name = objectName(request, old);
  const state = await deps.cluster.slotState(namespace, slot);
  const resident = state.residents.find((r) => r.kind === "Model" && r.name === name);
  if (resident) return modelRemoval(old, now, resident.tier);
  const tier = await workloadResidentTierOf(namespace, old, state, deps);
  return tier ? modelRemoval(old, now, tier) : own;
}

/** `its Deployment "qwen" is running` when the Model's workload is resident through its pods. */
async function workloadResidentTierOf(
  namespace: string,
  model: unknown,
  state: SlotState,
  deps: WebhookDeps,
): Promise<string | undefined> {
  const [ref] = workloadOfModel(model);
  if (!ref || (ref.kind !== "Deployment" && ref.kind !== "StatefulSet")) return undefined;
  const said = (tier: string) => `its ${ref.kind} "${ref.name}" is ${tier}`;
  // An annotated member workload was looked at by the slot's read already.
  const counted = state.residents.find((r) => r.kind === ref.kind && r.name === ref.name);
  if (counted) return said(counted.tier);
  const workload = await deps.cluster.readWorkload(namespace, ref.kind, ref.name);
  if (!workload || workloadReplicas(workload) <= 0) return undefined;
  const tier = await deps.cluster.workloadTier(namespace, workload);
  return tier ? said(tier) : undefined;
}

/** An allowing verdict with these warnings added (a denial stays as it is). */
const withWarnings = (verdict: Verdict, warnings: string[]): Verdict =>
  verdict.allowed && warnings.length > 0
    ? allow({ patch: verdict.patch, warnings: [...(verdict.warnings ?? []), ...warnings] })
    : verdict;

/** HorizontalPodAutoscaler (autoscaling/v2) or KEDA's ScaledObject, by the request's resource. */
function scalerKind(r: AdmissionRequest): ScalerKind | undefined {
  const { group, resource } = r.resource;
  if (group === "autoscaling" && resource === "horizontalpodautoscalers") return "HorizontalPodAutoscaler";
  if (group === "keda.sh" && resource === "scaledobjects") return "ScaledObject";
  return undefined;
}

/** The workload a Model serves: the same model as the Model for the residency rule. */
function workloadOfModel(model: unknown): MemberRef[] {
  const kind = stringAt(model, "spec", "workloadRef", "kind");
  const name = stringAt(model, "spec", "workloadRef", "name");
  return kind && name ? [{ kind, name }] : [];
}

/** The Models that serve a workload: the same model as the workload. */
const modelsAsMembers = (models: unknown[]): MemberRef[] =>
  models.map((m) => ({ kind: "Model", name: stringAt(m, "metadata", "name") ?? "" }));

const sameAs = (intent: ResidencyIntent | undefined, refs: MemberRef[]) =>
  intent ? { ...intent, sameAs: refs } : undefined;

/**
 * Warnings for a Knative Service or Configuration whose settings would do nothing; not for the
 * Configuration Knative writes for a Service (that Service's writer was told already).
 */
function knativeWarnings(kind: WorkloadKind, name: string, object: unknown): string[] {
  if (!isKnativeKind(kind) || (kind === "Configuration" && ownedByService(object))) return [];
  return knativeClassWarnings(kind, name, object);
}

function ownedByService(object: unknown): boolean {
  const owners = at(object, "metadata", "ownerReferences");
  return (
    Array.isArray(owners) &&
    owners.some(
      (o) => isObject(o) && o.kind === "Service" && String(o.apiVersion).startsWith("serving.knative.dev/"),
    )
  );
}

const handlers: Record<WebhookName, Handler> = {
  "validate-models": async (request, deps, signal) => {
    if (!isModels(request) || subResource(request) !== "") return unhandled("validate-models", request);
    const removing = !mayRemoveResident(request.userInfo, deps.autoscaler);
    if (request.operation === "DELETE") {
      const verdict = removing ? await leavingSlot(request, request.oldObject, undefined, deps) : allow();
      return releasing(request, verdict, modelLeaving(request.oldObject, undefined), deps, signal);
    }
    const model = request.object;
    const old = request.operation === "UPDATE" ? request.oldObject : undefined;
    const checked = validateModel(model);
    const refused =
      first(checked, validateSlotModelReplicas(model)) ??
      first(old && removing ? await leavingSlot(request, old, model, deps) : allow());
    if (refused) return refused;
    const verdict = await residency(
      request,
      sameAs(modelIntent(old ?? undefined, model), workloadOfModel(model)),
      deps,
      signal,
    );
    return releasing(
      request,
      withWarnings(verdict, [
        ...(checked.warnings ?? []),
        ...modelCountWarnings(objectName(request, model), model),
      ]),
      old ? modelLeaving(old, model) : undefined,
      deps,
      signal,
    );
  },

  "validate-slots": (request) => {
    if (!isSlots(request) || subResource(request) !== "") return unhandled("validate-slots", request);
    if (request.operation === "DELETE") return allow();
    return validateSlot(request.object);
  },

  "validate-workloads": async (request, deps, signal) => {
    if (isRevisions(request) && subResource(request) === "") {
      if (request.operation === "DELETE" || madeByConfiguration(request.object)) return allow();
      return reviewDirectRevision(request.object);
    }
    const kind = workloadKind(request);
    if (!kind || subResource(request) !== "") return unhandled("validate-workloads", request);
    const namespace = namespaceOf(request);
    const current = request.operation === "DELETE" ? request.oldObject : request.object;
    const name = objectName(request, current);
    const models = deps.cluster.modelsReferencing(namespace, kind, name);
    const modelId = workloadModelId(current, models);
    const old = request.operation === "CREATE" ? undefined : request.oldObject;
    const oldSlot = old ? workloadSlot(kind, old, models) : undefined;
    const member = { kind, name };

    if (request.operation === "DELETE") {
      const leaving = workloadLeaving(kind, old, undefined, oldSlot, undefined);
      if (!oldSlot || isKnativeKind(kind) || mayRemoveResident(request.userInfo, deps.autoscaler))
        return releasing(request, allow(), leaving, deps, signal);
      const removal = workloadRemoval(
        member,
        oldSlot,
        await deps.cluster.workloadTier(namespace, old),
        "deleting it",
        modelId,
      );
      return releasing(request, removal, leaving, deps, signal);
    }
    const annotations = validateWorkloadAnnotations(kind, request.object);
    if (!annotations.allowed) return annotations;
    const newSlot = workloadSlot(kind, request.object, models);
    if (
      old &&
      oldSlot &&
      newSlot !== oldSlot &&
      !isKnativeKind(kind) &&
      !mayRemoveResident(request.userInfo, deps.autoscaler)
    ) {
      const how = newSlot
        ? `changing annotation ${slotAnnotation} to "${newSlot}"`
        : `removing annotation ${slotAnnotation}`;
      const removal = workloadRemoval(
        member,
        oldSlot,
        await deps.cluster.workloadTier(namespace, old),
        how,
        modelId,
      );
      if (!removal.allowed) return removal;
    }
    const intent = workloadIntent(kind, old ?? undefined, request.object, oldSlot, newSlot, modelId);
    const verdict = await residency(request, sameAs(intent, modelsAsMembers(models)), deps, signal);
    return releasing(
      request,
      withWarnings(verdict, [
        ...(annotations.warnings ?? []),
        ...knativeWarnings(kind, name, request.object),
      ]),
      old ? workloadLeaving(kind, old, request.object, oldSlot, newSlot) : undefined,
      deps,
      signal,
    );
  },

  "validate-scale": async (request, deps, signal) => {
    if (subResource(request) !== "scale" || request.operation !== "UPDATE")
      return unhandled("validate-scale", request);
    const namespace = namespaceOf(request);
    const name = request.name ?? "";
    // A count above the Model's maxReplicas is allowed and said; only a count above 1 (the least
    // maxReplicas) can be, so only then is the Model looked up (cache first).
    const replicas = integerAt(request.object, "spec", "replicas") ?? 0;
    const capped =
      isModels(request) && replicas > 1
        ? modelCountWarnings(
            name,
            deps.cluster.cachedModel(namespace, name) ?? (await deps.cluster.readModel(namespace, name)),
            replicas,
          )
        : [];
    // Only a change from 0 up can matter; read the parent only then. A change to 0 gives back the
    // member's admission claim.
    if (!scaleIntent(request.oldObject, request.object, { kind: "", name }, "-", ""))
      return releasing(request, allow({ warnings: capped }), await scaledToZero(request, deps), deps, signal);
    if (isModels(request)) {
      const model = await deps.cluster.readModel(namespace, name);
      const member = { kind: "Model", name };
      const intent = scaleIntent(
        request.oldObject,
        request.object,
        member,
        modelSlot(model),
        modelIdOf(model),
      );
      return withWarnings(
        await residency(request, sameAs(intent, workloadOfModel(model)), deps, signal),
        capped,
      );
    }
    const kind = workloadKind(request);
    if (kind !== "Deployment" && kind !== "StatefulSet") return unhandled("validate-scale", request);
    const workload = await deps.cluster.readWorkload(namespace, kind, name);
    const models = deps.cluster.modelsReferencing(namespace, kind, name);
    const slot = workload ? workloadSlot(kind, workload, models) : undefined;
    const intent = scaleIntent(
      request.oldObject,
      request.object,
      { kind, name },
      slot,
      workloadModelId(workload, models),
    );
    return residency(request, sameAs(intent, modelsAsMembers(models)), deps, signal);
  },

  "validate-scalers": async (request, deps) => {
    const kind = scalerKind(request);
    if (!kind || subResource(request) !== "") return unhandled("validate-scalers", request);
    if (request.operation === "DELETE") return allow();
    const namespace = namespaceOf(request);
    const workload = scaledWorkload(request.object);
    if (workload) {
      const models = deps.cluster.modelsReferencing(namespace, workload.kind, workload.name);
      return allow({ warnings: scalerWorkloadWarnings(kind, request.object, models) });
    }
    const target = scalerTarget(kind, request.object);
    if (!target) return allow();
    const model =
      deps.cluster.cachedModel(namespace, target.model) ??
      (await deps.cluster.readModel(namespace, target.model));
    return allow({ warnings: scalerBoundsWarnings(kind, request.object, model) });
  },

  "mutate-workloads": (request, deps) => {
    const kind = workloadKind(request);
    if (!kind || subResource(request) !== "" || request.operation === "DELETE")
      return unhandled("mutate-workloads", request);
    const namespace = namespaceOf(request);
    const name = objectName(request, request.object);
    const models = deps.cluster.modelsReferencing(namespace, kind, name);
    const slot = workloadSlot(kind, request.object, models);
    const pinned = pinWorkload(kind, request.object, slot, workloadSleeps(request.object, models));
    // Gate paths sit apart from the pinning's (replicas, template metadata): both apply as they are.
    const isModel = models.length > 0 || asksForModel(annotationsOf(request.object));
    const gate = gateWorkload(kind, request.object, isModel);
    // A slot member's pods get sleep mode from the pod webhook; another model's author is told.
    const sleepless =
      isModel && slot === undefined && workloadSleeps(request.object, models)
        ? sleepModeWarnings({ kind, name }, request.object)
        : [];
    return allow({ patch: [...pinned.patch, ...gate], warnings: [...pinned.warnings, ...sleepless] });
  },

  "mutate-scale": async (request, deps) => {
    if (subResource(request) !== "scale" || request.operation !== "UPDATE")
      return unhandled("mutate-scale", request);
    const namespace = namespaceOf(request);
    const name = request.name ?? "";
    // Only more than one replica can need pinning; look the parent up only then.
    if (pinScale(request.object, { kind: "", name }, "-").patch.length === 0) return allow();
    if (isModels(request)) {
      const slot = modelSlot(
        deps.cluster.cachedModel(namespace, name) ?? (await deps.cluster.readModel(namespace, name)),
      );
      return allow(pinScale(request.object, { kind: "Model", name }, slot));
    }
    const kind = workloadKind(request);
    if (kind !== "Deployment" && kind !== "StatefulSet") return unhandled("mutate-scale", request);
    const workload = await deps.cluster.readWorkload(namespace, kind, name);
    const slot = workload
      ? workloadSlot(kind, workload, deps.cluster.modelsReferencing(namespace, kind, name))
      : undefined;
    return allow(pinScale(request.object, { kind, name }, slot));
  },

  "mutate-pods": (request, deps) => {
    if (request.resource.group !== "" || request.resource.resource !== "pods" || subResource(request) !== "")
      return unhandled("mutate-pods", request);
    if (request.operation !== "CREATE") return allow();
    const slot = stringAt(request.object, "metadata", "annotations", slotAnnotation);
    if (!slot) return allow();
    const slotObject = deps.cluster.cachedSlot(namespaceOf(request), slot);
    const device = stringAt(slotObject, "spec", "device");
    // A Slot stored before devices were checked may name none (`all`): that one is not bound.
    if (device !== undefined && !slotDevice.safeParse(device).success) {
      const mutated = mutatePod(request.object, { slot });
      return allow({ ...mutated, warnings: [invalidDeviceWarning(slot, device), ...mutated.warnings] });
    }
    return allow(mutatePod(request.object, { slot, ...(device ? { device } : {}) }));
  },
};

export function handle(
  name: WebhookName,
  request: AdmissionRequest,
  deps: WebhookDeps,
  signal?: AbortSignal,
): Promise<Verdict> {
  // A CONNECT (exec, attach, proxy) carries options, not an object: no rule of these webhooks is
  // about one, so it can only come from a misconfigured rule.
  if (request.operation === "CONNECT") return Promise.resolve(unhandled(name, request));
  return Promise.resolve(handlers[name](request, deps, signal));
}
