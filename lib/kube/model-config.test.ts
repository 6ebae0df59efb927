import { describe, expect, test } from "vitest";
import { tierSettings } from "../settings/model.ts";
import type { KubeObject } from "./client.ts";
import { modelFromResource, slotConfigFrom } from "./model-config.ts";
import type { ModelResource } from "./model-resource.ts";
import type { SlotResource } from "./slot-resource.ts";

describe("modelFromResource", () => {
  const model = (slot: string) =>
    ({
      apiVersion: "snooze.dev/v1alpha1",
      kind: "Model",
      metadata: { name: "qwen", namespace: "team-a" },
      spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" }, slot },
    }) as ModelResource & KubeObject;

  test("a Model stored before slot names were checked is still read (only its next write is refused)", () => {
    const read = modelFromResource(model("GPU_0"));
    expect("error" in read ? read.error : read.config.slot).toBe("GPU_0");
  });

  test("snooze.yaml's slot names stay as they were: the Slot-object rule is Kubernetes' alone", () => {
    expect(tierSettings.safeParse({ slot: "GPU_0" }).success).toBe(true);
  });
});

test("a Slot stored before devices were checked keeps its policy (the autoscaler does not use the device)", () => {
  const slot = {
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Slot",
    metadata: { name: "gpu-0" },
    spec: { policy: "fifo", device: "all" },
  } as unknown as SlotResource;
  expect(slotConfigFrom("gpu-0", slot).policy).toBe("fifo");
});
