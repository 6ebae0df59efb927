import { describe, expect, test } from "vitest";
import { modelSpec } from "../../lib/kube/model-resource.ts";
import { isAnnotated, modelForWorkload, ownedBy, sameSpec, type Workload } from "./workload-models.ts";

const deployment = (annotations: Record<string, string>, port?: number): Workload => ({
  apiVersion: "apps/v1",
  kind: "Deployment",
  metadata: { name: "qwen", namespace: "team-a", uid: "u-1", annotations },
  spec: { template: { spec: { containers: [{ ports: port ? [{ containerPort: port }] : [] }] } } },
});

describe("Models from annotated workloads", () => {
  test("annotations become a Model spec in their written form, owned by the workload", () => {
    const result = modelForWorkload(
      deployment(
        {
          "snooze.dev/model": "qwen3",
          "snooze.dev/aliases": "q, qwen-small",
          "snooze.dev/sleep-after": "5m",
          "snooze.dev/sleep-level": "2",
          "snooze.dev/zero-after": "never",
          "snooze.dev/host-memory": "2Gi",
          "snooze.dev/warmup": "false",
          "snooze.dev/queue-depth": "10",
          "kubectl.kubernetes.io/last-applied-configuration": "{}",
        },
        8001,
      ),
      "Deployment",
    );
    expect(result?.problems).toBeUndefined();
    const model = result!.model!;
    expect(model.metadata).toMatchObject({
      name: "qwen",
      namespace: "team-a",
      labels: { "app.kubernetes.io/managed-by": "snooze-autoscaler" },
      ownerReferences: [
        { apiVersion: "apps/v1", kind: "Deployment", name: "qwen", uid: "u-1", controller: true },
      ],
    });
    expect(model.spec).toEqual({
      workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" },
      model: "qwen3",
      port: 8001,
      aliases: ["q", "qwen-small"],
      sleepAfter: "5m",
      sleepLevel: 2,
      zeroAfter: "never",
      hostMemory: "2Gi",
      warmup: false,
      queueDepth: 10,
    });
    // The spec is one the Model schema (and so the CRD) accepts.
    expect(modelSpec.safeParse(model.spec).success).toBe(true);
  });

  test("an annotated StatefulSet's Model refers to it as apps/v1, as a Deployment's does", () => {
    const statefulSet = { ...deployment({ "snooze.dev/sleep-after": "1m" }), kind: "StatefulSet" };
    const model = modelForWorkload(statefulSet, "StatefulSet")!.model!;
    expect(model.metadata.ownerReferences).toEqual([
      { apiVersion: "apps/v1", kind: "StatefulSet", name: "qwen", uid: "u-1", controller: true },
    ]);
    expect(model.spec).toMatchObject({
      workloadRef: { apiVersion: "apps/v1", kind: "StatefulSet", name: "qwen" },
    });
    expect(modelSpec.safeParse(model.spec).success).toBe(true);
  });

  test("a workload without snooze.dev settings gets no Model; tier annotations alone do not count", () => {
    expect(modelForWorkload(deployment({ "app/x": "1" }), "Deployment")).toBeUndefined();
    expect(isAnnotated(deployment({ "snooze.dev/tier": "ready" }))).toBe(false);
    expect(isAnnotated(deployment({ "snooze.dev/model": "x" }))).toBe(true);
  });

  test("bad annotations are reported, with the annotation and the reason, and make no Model", () => {
    const result = modelForWorkload(
      deployment({ "snooze.dev/sleep-after": "soon", "snooze.dev/nap": "1" }),
      "Deployment",
    );
    expect(result?.model).toBeUndefined();
    expect(result?.problems?.join("\n")).toMatch(/snooze\.dev\/nap="1": unknown setting/);
    expect(result?.problems?.join("\n")).toMatch(/snooze\.dev\/sleep-after="soon": expected a duration/);
  });

  test("a snooze.dev/model that spec.model could not hold is reported, not sent to be refused", () => {
    const result = modelForWorkload(deployment({ "snooze.dev/model": "x y" }), "Deployment");
    expect(result?.model).toBeUndefined();
    expect(result?.problems).toEqual(['snooze.dev/model="x y": a model id may not contain whitespace']);
  });

  test("a Knative Service is referenced as one", () => {
    const service: Workload = {
      apiVersion: "serving.knative.dev/v1",
      kind: "Service",
      metadata: { name: "llama", namespace: "ns", uid: "u", annotations: { "snooze.dev/sleep-after": "1m" } },
    };
    expect(modelForWorkload(service, "Service")?.model?.spec.workloadRef).toEqual({
      apiVersion: "serving.knative.dev/v1",
      kind: "Service",
      name: "llama",
    });
  });

  test("sameSpec ignores what the API defaults and what HPA writes, not a removed setting", () => {
    const desired = { workloadRef: { kind: "Deployment" }, model: "q", port: 8000, sleepAfter: "5m" };
    expect(sameSpec({ ...desired, minReplicas: 0, maxReplicas: 1, replicas: 3 }, desired)).toBe(true);
    expect(sameSpec({ ...desired, sleepAfter: "6m" }, desired)).toBe(false);
    expect(sameSpec({ ...desired, zeroAfter: "1h" }, desired)).toBe(false);
    // A bound that went (min-scale of an unreachable revision, a withdrawn cluster default) is a
    // change: the API's defaults are 0 and 1, not what the Model said before.
    expect(sameSpec({ ...desired, minPods: 0, port: 8000 }, desired)).toBe(true);
    expect(sameSpec({ ...desired, minPods: 1 }, desired)).toBe(false);
    expect(sameSpec({ ...desired, maxReplicas: 3 }, desired)).toBe(false);
    expect(sameSpec({ ...desired, minReplicas: 1 }, desired)).toBe(false);
  });

  test("ownedBy: the managed-by label and an owner reference to the workload", () => {
    const model = modelForWorkload(deployment({ "snooze.dev/model": "q" }), "Deployment")!.model!;
    expect(ownedBy(model, { kind: "Deployment", name: "qwen" })).toBe(true);
    expect(ownedBy(model, { kind: "Deployment", name: "other" })).toBe(false);
    expect(ownedBy({ metadata: { name: "qwen" } }, { kind: "Deployment", name: "qwen" })).toBe(false);
  });
});
