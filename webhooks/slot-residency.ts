import type { UserInfo } from "./admission.ts";
import {
  type MemberRef,
  memberRemovalMessage,
  notLeaseHolderMessage,
  secondResidentMessage,
} from "./messages.ts";
import { integerAt } from "./object-path.ts";
import {
  isKnativeKind,
  modelDesiredReplicas,
  modelIdOf,
  modelResidentTier,
  modelSlot,
  slotAnnotation,
  type WorkloadKind,
  workloadReplicas,
} from "./slot-members.ts";
import { allow, forbid, type Verdict } from "./verdict.ts";

/**
 * One resident per slot: the decisions, pure. A write that would make a member of slot S resident
 * while another member is resident (or a swap is in progress) is refused, unless it comes from the
 * autoscaler replica that holds the slot's Lease. A resident member may not leave its slot.
 */

export interface Resident extends MemberRef {
  tier: string;
}

/** What the webhook knows about a slot when it decides: read fresh from the API. */
export interface SlotState {
  residents: Resident[];
  transition?: { from?: string; to: string; step: string };
}

/** A write that makes `member` want the accelerator of `slot`. */
export interface ResidencyIntent {
  slot: string;
  member: MemberRef;
  /**
   * The same model under another name: a Model and the workload its workloadRef names (an
   * annotated Deployment has both). Its residency is not a second resident.
   */
  sameAs?: MemberRef[];
  /** In words: `spec.replicas from 0 to 1`. */
  change: string;
  modelId: string;
}

export const podNameExtra = "authentication.kubernetes.io/pod-name";

/** The requester's pod, from a bound ServiceAccount token; absent for other credentials. */
export const requesterPod = (user: UserInfo) => user.extra?.[podNameExtra]?.[0];

export interface AutoscalerIdentity {
  /** `system:serviceaccount:snooze-system:snooze-autoscaler` unless configured otherwise. */
  username: string;
  /** Where the autoscaler keeps its Leases (its own namespace, snooze-system by default). */
  leaseNamespace: string;
}

/**
 * The verdict on a write that makes a member want the slot. `leaseHolder` is the Lease's
 * holderIdentity, read only when the requester is the autoscaler with a pod-bound token.
 */
export function decideResidency(
  intent: ResidencyIntent,
  state: SlotState,
  user: UserInfo,
  autoscaler: AutoscalerIdentity,
  leaseHolder?: string,
): Verdict {
  const self = [intent.member, ...(intent.sameAs ?? [])];
  const others = state.residents.filter((r) => !self.some((m) => m.kind === r.kind && m.name === r.name));
  if (others.length === 0 && !state.transition) return allow();
  if (user.username === autoscaler.username) {
    const pod = requesterPod(user);
    // Without a pod-bound token the ServiceAccount alone identifies the autoscaler (see docs).
    if (pod === undefined || pod === leaseHolder) return allow();
    return forbid(notLeaseHolderMessage(intent.slot, pod, leaseHolder));
  }
  return forbid(
    secondResidentMessage({
      slot: intent.slot,
      member: intent.member,
      change: intent.change,
      modelId: intent.modelId,
      resident: others[0],
      transition: state.transition,
    }),
  );
}

/** Does this Model write make it want its slot (replicas or minReplicas from 0 up, or joining a slot)? */
export function modelIntent(oldModel: unknown, newModel: unknown): ResidencyIntent | undefined {
  const slot = modelSlot(newModel);
  const wanted = modelDesiredReplicas(newModel);
  if (!slot || wanted < 1) return undefined;
  const oldSlot = oldModel === undefined ? undefined : modelSlot(oldModel);
  const oldWanted = oldModel === undefined ? 0 : modelDesiredReplicas(oldModel);
  if (oldSlot === slot && oldWanted >= 1) return undefined;
  const member = { kind: "Model", name: nameOf(newModel) };
  const change =
    oldSlot !== slot && oldWanted >= 1
      ? `spec.slot from ${oldSlot ? `"${oldSlot}"` : "none"} to "${slot}"`
      : replicasChange(newModel, oldModel);
  return { slot, member, change, modelId: modelIdOf(newModel) };
}

function replicasChange(model: unknown, oldModel: unknown): string {
  const replicas = integerAt(model, "spec", "replicas") ?? 0;
  const field = replicas >= 1 ? "replicas" : "minReplicas";
  const before = oldModel === undefined ? 0 : (integerAt(oldModel, "spec", field) ?? 0);
  return `spec.${field} from ${before} to ${integerAt(model, "spec", field)}`;
}

/** A Deployment or StatefulSet write: replicas from 0 up, or joining a slot with replicas. */
export function workloadIntent(
  kind: WorkloadKind,
  oldWorkload: unknown,
  newWorkload: unknown,
  oldSlot: string | undefined,
  newSlot: string | undefined,
  modelId: string,
): ResidencyIntent | undefined {
  if (!newSlot || isKnativeKind(kind)) return undefined;
  const replicas = workloadReplicas(newWorkload);
  if (replicas < 1) return undefined;
  const oldReplicas = oldWorkload === undefined ? 0 : workloadReplicas(oldWorkload);
  if (oldSlot === newSlot && oldReplicas >= 1) return undefined;
  const change =
    oldSlot !== newSlot && oldReplicas >= 1
      ? `annotation ${slotAnnotation} from ${oldSlot ? `"${oldSlot}"` : "none"} to "${newSlot}"`
      : `spec.replicas from ${oldReplicas} to ${replicas}`;
  return { slot: newSlot, member: { kind, name: nameOf(newWorkload) }, change, modelId };
}

/** A write to the scale subresource (autoscaling/v1 Scale) from 0 up. */
export function scaleIntent(
  oldScale: unknown,
  newScale: unknown,
  member: MemberRef,
  slot: string | undefined,
  modelId: string,
): ResidencyIntent | undefined {
  const replicas = integerAt(newScale, "spec", "replicas") ?? 0;
  const before = integerAt(oldScale, "spec", "replicas") ?? 0;
  if (!slot || replicas < 1 || before >= 1) return undefined;
  return { slot, member, change: `spec.replicas (scale) from ${before} to ${replicas}`, modelId };
}

/**
 * A member that stops asking for its slot: it asked before the write (its stored object, so a write
 * that made it ask was stored) and the write deletes it, takes it to 0, or out of the slot. Its own
 * admission claim on the slot is then released (see slot-claims.ts).
 */
export interface Leaving {
  slot: string;
  member: MemberRef;
}

/** A Model that asked for its slot (replicas or minReplicas ≥ 1) and no longer does (`newModel` undefined: deleted). */
export function modelLeaving(oldModel: unknown, newModel: unknown | undefined): Leaving | undefined {
  const slot = modelSlot(oldModel);
  if (!slot || modelDesiredReplicas(oldModel) < 1) return undefined;
  if (newModel !== undefined && modelSlot(newModel) === slot && modelDesiredReplicas(newModel) >= 1)
    return undefined;
  return { slot, member: { kind: "Model", name: nameOf(oldModel) } };
}

/** A Deployment or StatefulSet of a slot with replicas that is deleted (`newWorkload` undefined), scaled to 0 or moved out. */
export function workloadLeaving(
  kind: WorkloadKind,
  oldWorkload: unknown,
  newWorkload: unknown | undefined,
  oldSlot: string | undefined,
  newSlot: string | undefined,
): Leaving | undefined {
  if (!oldSlot || isKnativeKind(kind) || workloadReplicas(oldWorkload) < 1) return undefined;
  if (newWorkload !== undefined && newSlot === oldSlot && workloadReplicas(newWorkload) >= 1)
    return undefined;
  return { slot: oldSlot, member: { kind, name: nameOf(oldWorkload) } };
}

/** A write to the scale subresource from 1 or more to 0. */
export function scaleLeaving(
  oldScale: unknown,
  newScale: unknown,
  member: MemberRef,
  slot: string | undefined,
): Leaving | undefined {
  const replicas = integerAt(newScale, "spec", "replicas") ?? 0;
  const before = integerAt(oldScale, "spec", "replicas") ?? 0;
  if (!slot || before < 1 || replicas >= 1) return undefined;
  return { slot, member };
}

/**
 * A resident Model may not be deleted or moved out of its slot. `tier` is the Model's resident tier:
 * its own status's unless the caller read the slot (whose `status.resident` counts as well).
 */
export function modelRemoval(
  oldModel: unknown,
  newModel: unknown | undefined,
  tier = modelResidentTier(oldModel),
): Verdict {
  const slot = modelSlot(oldModel);
  if (!slot) return allow();
  const newSlot = newModel === undefined ? undefined : modelSlot(newModel);
  if (newModel !== undefined && newSlot === slot) return allow();
  if (!tier) return allow();
  const how =
    newModel === undefined
      ? "deleting it"
      : newSlot
        ? `changing spec.slot to "${newSlot}"`
        : "removing spec.slot";
  return forbid(
    memberRemovalMessage({
      slot,
      member: { kind: "Model", name: nameOf(oldModel), tier },
      how,
      modelId: modelIdOf(oldModel),
    }),
  );
}

/** A resident workload member may not be deleted or leave its slot (tier read by the caller). */
export function workloadRemoval(
  member: MemberRef,
  slot: string,
  tier: string | undefined,
  how: string,
  modelId: string,
): Verdict {
  if (!tier) return allow();
  return forbid(memberRemovalMessage({ slot, member: { ...member, tier }, how, modelId }));
}

/**
 * Deletes by Kubernetes' own controllers are never refused: the namespace controller empties a
 * namespace being deleted and the garbage collector follows owner references. Refusing them would
 * leave namespaces stuck in Terminating.
 */
export function isSystemController(user: UserInfo): boolean {
  const name = user.username ?? "";
  return name === "system:kube-controller-manager" || name.startsWith("system:serviceaccount:kube-system:");
}

/**
 * Who may take a resident member out of its slot anyway: Kubernetes' own controllers (above), and
 * the autoscaler, which replaces the Models it made for annotated workloads (delete, then create).
 */
export function mayRemoveResident(user: UserInfo, autoscaler: AutoscalerIdentity): boolean {
  return isSystemController(user) || user.username === autoscaler.username;
}

/** The autoscaler's namespace from its ServiceAccount user name, where its Leases live. */
export function serviceAccountNamespace(username: string): string | undefined {
  return /^system:serviceaccount:([^:]+):[^:]+$/.exec(username)?.[1];
}

const nameOf = (object: unknown): string => {
  const metadata = (object as { metadata?: { name?: unknown } } | undefined)?.metadata;
  return typeof metadata?.name === "string" ? metadata.name : "";
};
