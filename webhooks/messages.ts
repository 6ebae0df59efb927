import { slotLeaseName } from "../lib/kube/lease.ts";

/**
 * Every message a person can get from the webhooks, in one place: the rules build them here and
 * docs/webhooks.md quotes them (a unit test checks the docs still match).
 */

export interface MemberRef {
  kind: string;
  name: string;
}

const ref = (member: MemberRef) => `${member.kind} "${member.name}"`;

/** Problems listed in one denial at most; the rest are counted (`; and 7,980 more`). */
export const listedProblems = 20;

/** Problems joined with `; `, the first `listedProblems` of them, the rest counted. */
function problemList(problems: string[]): string {
  const shown = problems.slice(0, listedProblems).join("; ");
  const more = problems.length - listedProblems;
  return more > 0 ? `${shown}; and ${more.toLocaleString("en-US")} more` : shown;
}

export function invalidSpecMessage(kind: string, name: string, problems: string[]): string {
  return `${kind} "${name}" is not valid: ${problemList(problems)}`;
}

export function invalidAnnotationsMessage(kind: string, name: string, problems: string[]): string {
  return `${kind} "${name}" has invalid snooze.dev annotations: ${problemList(problems)}`;
}

/** Admin API of the activator: where a person asks for a swap. */
const wakePath = (modelId: string) => `POST /snooze/v1/models/${encodeURIComponent(modelId)}/wake`;
const sleepPath = (modelId: string) => `POST /snooze/v1/models/${encodeURIComponent(modelId)}/sleep`;

export function slotModelReplicasMessage(name: string, slot: string, fields: [string, number][]): string {
  const asked = fields.map(([field, value]) => `${field} is ${value}`).join(", ");
  return (
    `Model "${name}" is in slot "${slot}" and may ask for at most one replica, but ${asked}. ` +
    "A slot is one accelerator that runs one member at a time: set these to 1 or less, " +
    "or remove spec.slot to scale the model on its own."
  );
}

export interface SecondResident {
  slot: string;
  member: MemberRef;
  /** What the write changes, e.g. `spec.replicas from 0 to 1`. */
  change: string;
  modelId: string;
  resident?: MemberRef & { tier: string };
  transition?: { from?: string; to: string; step: string };
}

export function secondResidentMessage(d: SecondResident): string {
  const state = d.transition
    ? `slot "${d.slot}" is swapping${d.transition.from ? ` from "${d.transition.from}"` : ""} to "${d.transition.to}" (step ${d.transition.step})`
    : `slot "${d.slot}" already has a resident: ${ref(d.resident!)} (${d.resident!.tier})`;
  return (
    `${state}; changing ${d.change} of ${ref(d.member)} would make a second member resident. ` +
    `Only the Snooze autoscaler that holds the Lease ${slotLeaseName(d.slot)} swaps members. ` +
    `To switch, ask for a swap: send a request for model "${d.modelId}" through the activator, ` +
    `or ${wakePath(d.modelId)} on the activator.`
  );
}

export function notLeaseHolderMessage(slot: string, pod: string, holder: string | undefined): string {
  return (
    `the autoscaler replica "${pod}" does not hold the Lease ${slotLeaseName(slot)} ` +
    `(${holder ? `held by "${holder}"` : "no holder"}); only the holder swaps members of slot "${slot}".`
  );
}

export interface MemberRemoval {
  slot: string;
  member: MemberRef & { tier: string };
  /** How the write removes it, e.g. `deleting it`, `changing spec.slot to "gpu-1"`. */
  how: string;
  modelId: string;
}

export function memberRemovalMessage(d: MemberRemoval): string {
  return (
    `${ref(d.member)} is resident in slot "${d.slot}" (${d.member.tier}) and may not leave the slot while ` +
    `resident: ${d.how} is refused. Let it sleep first (${sleepPath(d.modelId)} on the activator, ` +
    "or scale it to 0), then retry."
  );
}

export function pinnedWarning(member: MemberRef, slot: string, field: string, from: string): string {
  return (
    `${ref(member)} is in slot "${slot}": ${field} ${from} pinned to 1 ` +
    "(a slot runs one replica of one member at a time; take it out of the slot to scale it out)"
  );
}

export function noEngineContainerWarning(slot: string): string {
  return (
    `pod of slot "${slot}": no vLLM container found (several containers and none names vllm in its ` +
    "image or command), so sleep mode was not set up"
  );
}

export function shellCommandWarning(container: string): string {
  return (
    `container "${container}" runs vLLM through a shell (sh -c), so --enable-sleep-mode could not be ` +
    "added: add it to the command yourself"
  );
}

export function sleepModeMissingWarning(workload: MemberRef, container: string, missing: string[]): string {
  return (
    `${ref(workload)}: container "${container}" runs vLLM without ${missing.join(" and ")}, which vLLM serves ` +
    "its sleep endpoints only with: each sleep Snooze asks for would fail and stop the engine instead (a cold " +
    'start at its next request). Add them to the container, or set snooze.dev/sleep: "false" (a Model\'s ' +
    "spec.sleep: false) for a model that cannot sleep"
  );
}

export function invalidDeviceWarning(slot: string, device: string): string {
  return (
    `slot "${slot}": the Slot's spec.device ${JSON.stringify(device)} is not one GPU (it was stored before ` +
    "devices were checked), so NVIDIA_VISIBLE_DEVICES was left as the pod has it: set the Slot's device to " +
    "a GPU index, a GPU UUID or a MIG device"
  );
}

export function deviceOverrideWarning(container: string, from: string, device: string): string {
  return `container "${container}": NVIDIA_VISIBLE_DEVICES ${from} replaced by the slot's device ${device}`;
}

export function gpuRequestWarning(container: string, slot: string): string {
  return (
    `container "${container}" requests nvidia.com/gpu while slot "${slot}" names its device: ` +
    "the device plugin may hand it another GPU; drop the request to share the slot's device"
  );
}

export function unhandledResourceWarning(webhook: string, resource: string): string {
  return `snooze webhook ${webhook} does not handle ${resource}; check the rules of the webhook configuration`;
}

/** For a Model in a slot, spec.maxReplicas above 1 is refused: no use telling anyone to raise it. */
const slotBound = (slot: string) =>
  `the Model is in slot "${slot}", which runs one replica of one member (spec.maxReplicas above 1 is refused): take it out of the slot to run more`;

export function scalerTargetsModelWorkloadWarning(
  scaler: MemberRef,
  workload: MemberRef,
  model: string,
  modelApiVersion: string,
): string {
  return (
    `${ref(scaler)} scales ${ref(workload)} (spec.scaleTargetRef), the workload of Model "${model}": ` +
    `Snooze sets its replicas itself (it starts pods for held requests and stops sleeping ones), so the two ` +
    `would fight over the count. Scale the Model instead: spec.scaleTargetRef {apiVersion: ${modelApiVersion}, ` +
    `kind: Model, name: ${model}}; its spec.replicas is the number of awake replicas wanted`
  );
}

export function maxReplicasCapWarning(
  scaler: MemberRef,
  field: string,
  asked: number,
  model: string,
  max: number,
  slot?: string,
): string {
  return (
    `${ref(scaler)} may ask Model "${model}" for ${asked} replicas (${field}), but the Model's ` +
    `spec.maxReplicas is ${max}: Snooze runs at most ${max}, and the Model's ReplicasCapped condition ` +
    `says so while a count is above it. Set ${field} to ${max} or less` +
    (slot === undefined ? ", or raise the Model's spec.maxReplicas" : `; ${slotBound(slot)}`)
  );
}

export function modelCountCapWarning(model: string, replicas: number, max: number, slot?: string): string {
  return (
    `Model "${model}": spec.replicas ${replicas} is above spec.maxReplicas ${max}: at most ${max} ${max === 1 ? "replica runs" : "replicas run"} ` +
    `(the Model's ReplicasCapped condition says so); ${slot === undefined ? "raise spec.maxReplicas to run more" : slotBound(slot)}`
  );
}
