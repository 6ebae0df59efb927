import {
  deviceOverrideWarning,
  gpuRequestWarning,
  invalidDeviceWarning,
  maxReplicasCapWarning,
  memberRemovalMessage,
  modelCountCapWarning,
  noEngineContainerWarning,
  notLeaseHolderMessage,
  pinnedWarning,
  scalerTargetsModelWorkloadWarning,
  secondResidentMessage,
  shellCommandWarning,
  sleepModeMissingWarning,
  slotModelReplicasMessage,
} from "./messages.ts";
import { validateModel, validateSlot, validateWorkloadAnnotations } from "./settings-validation.ts";

/**
 * One example of every message the webhooks give, as docs/webhooks.md quotes it; a unit test
 * checks that the page still contains each one word for word.
 */
export function messageExamples(): Record<string, string> {
  const ref = { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" };
  return {
    model: validateModel({ metadata: { name: "qwen" }, spec: { workloadRef: ref, sleepLevel: 3 } }).message!,
    slot: validateSlot({ metadata: { name: "gpu-0" }, spec: { policy: "lifo" } }).message!,
    annotations: validateWorkloadAnnotations("Deployment", {
      metadata: { name: "qwen", annotations: { "snooze.dev/sleep-after": "soon" } },
    }).message!,
    modelReplicas: slotModelReplicasMessage("qwen", "gpu-0", [["spec.maxReplicas", 2]]),
    secondResident: secondResidentMessage({
      slot: "gpu-0",
      member: { kind: "Deployment", name: "qwen" },
      change: "spec.replicas (scale) from 0 to 1",
      modelId: "qwen",
      resident: { kind: "Model", name: "llama", tier: "ready" },
    }),
    swapping: secondResidentMessage({
      slot: "gpu-0",
      member: { kind: "Model", name: "qwen" },
      change: "spec.replicas from 0 to 1",
      modelId: "qwen",
      transition: { from: "llama", to: "mistral", step: "draining" },
    }),
    notLeaseHolder: notLeaseHolderMessage("gpu-0", "snooze-autoscaler-7d9c-1", "snooze-autoscaler-7d9c-0"),
    removal: memberRemovalMessage({
      slot: "gpu-0",
      member: { kind: "Model", name: "llama", tier: "ready" },
      how: "deleting it",
      modelId: "llama",
    }),
    removalThroughWorkload: memberRemovalMessage({
      slot: "gpu-0",
      member: { kind: "Model", name: "qwen", tier: 'its Deployment "qwen" is running' },
      how: "deleting it",
      modelId: "qwen",
    }),
    pinned: pinnedWarning({ kind: "Deployment", name: "qwen" }, "gpu-0", "spec.replicas", "3"),
    noEngine: noEngineContainerWarning("gpu-0"),
    shell: shellCommandWarning("vllm"),
    sleepModeMissing: sleepModeMissingWarning({ kind: "Deployment", name: "qwen" }, "vllm", [
      "--enable-sleep-mode",
      "VLLM_SERVER_DEV_MODE=1",
    ]),
    device: deviceOverrideWarning("vllm", '"all"', "0"),
    invalidDevice: invalidDeviceWarning("gpu-0", "all"),
    gpuRequest: gpuRequestWarning("vllm", "gpu-0"),
    scalerCapped: maxReplicasCapWarning(
      { kind: "ScaledObject", name: "qwen" },
      "spec.maxReplicaCount",
      8,
      "qwen",
      4,
    ),
    scalerCappedInSlot: maxReplicasCapWarning(
      { kind: "HorizontalPodAutoscaler", name: "qwen" },
      "spec.maxReplicas",
      4,
      "qwen",
      1,
      "gpu-0",
    ),
    countCapped: modelCountCapWarning("qwen", 6, 4),
    scalerOnWorkload: scalerTargetsModelWorkloadWarning(
      { kind: "HorizontalPodAutoscaler", name: "qwen" },
      { kind: "Deployment", name: "qwen" },
      "qwen",
      "snooze.dev/v1alpha1",
    ),
  };
}
