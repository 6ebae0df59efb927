import { describe, expect, test } from "vitest";
import { applyPatch } from "./patch-builder.ts";
import { pinScale, pinWorkload } from "./replica-pinning.ts";

const deployment = (
  replicas: number | undefined,
  template: Record<string, unknown> = { metadata: { labels: { app: "q" } } },
) => ({
  metadata: { name: "qwen" },
  spec: { ...(replicas === undefined ? {} : { replicas }), template },
});

describe("pinWorkload", () => {
  test.each([
    { name: "3 replicas in a slot → 1", replicas: 3, slot: "s", pinned: 1, warned: true },
    { name: "1 replica in a slot stays", replicas: 1, slot: "s", pinned: 1, warned: false },
    { name: "0 replicas in a slot stays", replicas: 0, slot: "s", pinned: 0, warned: false },
    { name: "3 replicas outside a slot stay", replicas: 3, slot: undefined, pinned: 3, warned: false },
  ])("$name", ({ replicas, slot, pinned, warned }) => {
    const { patch, warnings } = pinWorkload("Deployment", deployment(replicas), slot);
    const result = applyPatch(deployment(replicas), patch);
    expect(result.spec.replicas).toBe(pinned);
    expect(warnings.length > 0).toBe(warned);
    if (warned)
      expect(warnings[0]).toBe(
        'Deployment "qwen" is in slot "s": spec.replicas 3 pinned to 1 (a slot runs one replica of one member at a time; take it out of the slot to scale it out)',
      );
  });

  test("the pod template is stamped with the slot, idempotently, and unstamped when it leaves", () => {
    const { patch } = pinWorkload("StatefulSet", deployment(1, {}), "gpu-0");
    const stamped = applyPatch(deployment(1, {}), patch);
    expect(stamped.spec.template).toEqual({
      metadata: { annotations: { "snooze.dev/slot": "gpu-0" }, labels: { "snooze.dev/slot-member": "true" } },
    });
    expect(pinWorkload("StatefulSet", stamped, "gpu-0").patch).toEqual([]);
    const left = applyPatch(stamped, pinWorkload("StatefulSet", stamped, undefined).patch);
    expect(left.spec.template).toEqual({ metadata: { annotations: {}, labels: {} } });
    expect(pinWorkload("StatefulSet", left, undefined).patch).toEqual([]);
  });

  test("a model that does not sleep says so on its pod template, the only place its pods' webhook reads", () => {
    const sleepOf = (workload: unknown) =>
      (workload as { spec: { template: { metadata: { annotations: Record<string, string> } } } }).spec
        .template.metadata.annotations["snooze.dev/sleep"];
    const once = applyPatch(deployment(1), pinWorkload("Deployment", deployment(1), "gpu-0", false).patch);
    expect(sleepOf(once)).toBe("false");
    expect(pinWorkload("Deployment", once, "gpu-0", false).patch).toEqual([]);
    // It sleeps again, or leaves the slot: the template says nothing any more.
    const again = applyPatch(once, pinWorkload("Deployment", once, "gpu-0", true).patch);
    expect(sleepOf(again)).toBeUndefined();
    expect(pinWorkload("Deployment", again, "gpu-0", true).patch).toEqual([]);
    const left = applyPatch(once, pinWorkload("Deployment", once, undefined, false).patch);
    expect(sleepOf(left)).toBeUndefined();
    // A Knative revision template's own setting is the user's: added when absent, never taken off.
    const service = { metadata: { name: "k" }, spec: { template: { metadata: { annotations: {} } } } };
    const knative = applyPatch(service, pinWorkload("Service", service, "gpu-0", false).patch);
    expect(sleepOf(knative)).toBe("false");
    expect(pinWorkload("Service", knative, "gpu-0", true).patch).toEqual([]);
  });

  test("annotation keys with a slash are escaped in the JSON Pointer", () => {
    const { patch } = pinWorkload(
      "Deployment",
      deployment(1, { metadata: { annotations: {}, labels: {} } }),
      "s",
    );
    expect(patch.map((p) => p.path)).toEqual([
      "/spec/template/metadata/annotations/snooze.dev~1slot",
      "/spec/template/metadata/labels/snooze.dev~1slot-member",
    ]);
  });

  test.each([
    { annotations: {}, expected: { "autoscaling.knative.dev/max-scale": "1" }, warnings: 0 },
    {
      annotations: { "autoscaling.knative.dev/max-scale": "4" },
      expected: { "autoscaling.knative.dev/max-scale": "1" },
      warnings: 1,
    },
    {
      annotations: { "autoscaling.knative.dev/max-scale": "0" },
      expected: { "autoscaling.knative.dev/max-scale": "1" },
      warnings: 1,
    },
    {
      annotations: { "autoscaling.knative.dev/max-scale": "1", "autoscaling.knative.dev/min-scale": "2" },
      expected: { "autoscaling.knative.dev/max-scale": "1", "autoscaling.knative.dev/min-scale": "1" },
      warnings: 1,
    },
    {
      // A slot member's new revision starts with no pod: its first request starts it, in turn.
      annotations: { "autoscaling.knative.dev/max-scale": "1", "autoscaling.knative.dev/initial-scale": "1" },
      expected: { "autoscaling.knative.dev/max-scale": "1" },
      warnings: 1,
    },
    {
      // Knative reads the older camelCase names when the kebab-case ones are absent: minScale 3
      // beside max-scale 1 was refused by Knative (found by an outside tester).
      annotations: { "autoscaling.knative.dev/minScale": "3" },
      expected: { "autoscaling.knative.dev/max-scale": "1", "autoscaling.knative.dev/min-scale": "1" },
      warnings: 1,
    },
    {
      annotations: { "autoscaling.knative.dev/maxScale": "5", "autoscaling.knative.dev/initialScale": "2" },
      expected: { "autoscaling.knative.dev/max-scale": "1" },
      warnings: 2,
    },
    {
      annotations: { "autoscaling.knative.dev/maxScale": "1", "autoscaling.knative.dev/minScale": "1" },
      expected: { "autoscaling.knative.dev/maxScale": "1", "autoscaling.knative.dev/minScale": "1" },
      warnings: 0,
    },
  ])("Knative Service template $annotations", ({ annotations, expected, warnings }) => {
    const service = { metadata: { name: "qwen" }, spec: { template: { metadata: { annotations } } } };
    const result = pinWorkload("Service", service, "s");
    const after = applyPatch(service, result.patch);
    expect(after.spec.template.metadata.annotations).toEqual({
      ...expected,
      "autoscaling.knative.dev/initial-scale": "0",
      "snooze.dev/slot": "s",
    });
    expect(result.warnings).toHaveLength(warnings);
    expect(pinWorkload("Service", after, "s").patch).toEqual([]);
  });
});

test("a Knative Service template with no annotations at all gets every pin, none lost to another", () => {
  const service = { metadata: { name: "qwen" }, spec: { template: { spec: {} } } };
  const after = applyPatch(service, pinWorkload("Service", service, "s").patch) as any;
  expect(after.spec.template.metadata.annotations).toEqual({
    "autoscaling.knative.dev/max-scale": "1",
    "autoscaling.knative.dev/initial-scale": "0",
    "snooze.dev/slot": "s",
  });
});

describe("pinScale", () => {
  test.each([
    { replicas: 5, slot: "s", patched: true },
    { replicas: 1, slot: "s", patched: false },
    { replicas: 5, slot: undefined, patched: false },
  ])("$replicas replicas, slot $slot", ({ replicas, slot, patched }) => {
    const result = pinScale({ spec: { replicas } }, { kind: "Model", name: "qwen" }, slot);
    expect(result.patch.length > 0).toBe(patched);
    if (patched) expect(applyPatch({ spec: { replicas } }, result.patch).spec.replicas).toBe(1);
  });
});

test("a template holding deeply nested fields is pinned as any other, not refused", () => {
  // A Knative Service's CRD keeps fields it does not know; one nested 10,000 deep overflowed the
  // stack of the deep copy each pinning step made, and the Service was refused with "retry",
  // which could never help (found by an outside tester).
  let deep: Record<string, unknown> = {};
  for (let i = 0; i < 10_000; i++) deep = { a: deep };
  const service = { metadata: { name: "qwen" }, spec: { template: { spec: { deep } } } };
  const { patch } = pinWorkload("Service", service, "s");
  const after = applyPatch(service, patch) as any;
  expect(after.spec.template.metadata.annotations).toEqual({
    "autoscaling.knative.dev/max-scale": "1",
    "autoscaling.knative.dev/initial-scale": "0",
    "snooze.dev/slot": "s",
  });
  expect(after.spec.template.spec.deep).toBe(deep);
  // The original is left as it was.
  expect((service.spec.template as any).metadata).toBeUndefined();
});
