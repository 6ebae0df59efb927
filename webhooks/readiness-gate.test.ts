import { describe, expect, test } from "vitest";
import { applyPatch } from "./patch-builder.ts";
import { gateWorkload } from "./readiness-gate.ts";

const deployment = (readinessGates?: unknown[]) => ({
  metadata: { name: "qwen" },
  spec: {
    template: { spec: { containers: [{ name: "vllm" }], ...(readinessGates ? { readinessGates } : {}) } },
  },
});
const gatesOf = (workload: unknown) =>
  (workload as ReturnType<typeof deployment>).spec.template.spec.readinessGates;

describe("the awake readiness gate on model workloads", () => {
  test("a model's Deployment gets the gate once; a second pass changes nothing", () => {
    const once = applyPatch(deployment(), gateWorkload("Deployment", deployment(), true));
    expect(gatesOf(once)).toEqual([{ conditionType: "snooze.dev/awake" }]);
    expect(gateWorkload("Deployment", once, true)).toEqual([]);
  });

  test("a Knative revision's Deployment gets no gate: its sleeping pods must count as available", () => {
    const revision = {
      ...deployment(),
      metadata: {
        name: "qwen-00001-deployment",
        ownerReferences: [{ apiVersion: "serving.knative.dev/v1", kind: "Revision", name: "qwen-00001" }],
      },
    };
    expect(gateWorkload("Deployment", revision, true)).toEqual([]);
  });

  test("other gates stay; ours is added after them", () => {
    const other = { conditionType: "example.com/ready" };
    const gated = applyPatch(deployment([other]), gateWorkload("StatefulSet", deployment([other]), true));
    expect(gatesOf(gated)).toEqual([other, { conditionType: "snooze.dev/awake" }]);
  });

  test("a workload that is no longer a model's loses the gate, and only it", () => {
    const other = { conditionType: "example.com/ready" };
    const before = deployment([other, { conditionType: "snooze.dev/awake" }]);
    expect(gatesOf(applyPatch(before, gateWorkload("Deployment", before, false)))).toEqual([other]);
    expect(gateWorkload("Deployment", deployment(), false)).toEqual([]);
  });

  test("a gate written twice goes in one pass, so no pod is left waiting on a condition nobody sets", () => {
    const other = { conditionType: "example.com/ready" };
    const awake = { conditionType: "snooze.dev/awake" };
    const before = deployment([awake, other, awake]);
    const after = applyPatch(before, gateWorkload("Deployment", before, false));
    expect(gatesOf(after)).toEqual([other]);
    expect(gateWorkload("Deployment", after, false)).toEqual([]);
  });

  test("Knative Services are left alone (Knative refuses readinessGates in a revision)", () => {
    expect(gateWorkload("Service", deployment(), true)).toEqual([]);
  });
});
