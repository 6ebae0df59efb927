import { describe, expect, test } from "vitest";
import { modelSpec } from "../../../lib/kube/model-resource.ts";
import { knativeDefaults } from "./autoscaler-config.ts";
import { goDuration } from "./go-duration.ts";
import { knativeSettings, modelForRevision, type PodAutoscaler, revisionReady } from "./revision-model.ts";

const pa = (annotations: Record<string, string>, spec: PodAutoscaler["spec"] = {}): PodAutoscaler => ({
  apiVersion: "autoscaling.internal.knative.dev/v1alpha1",
  kind: "PodAutoscaler",
  metadata: {
    name: "qwen-00001",
    namespace: "team-a",
    uid: "pa-uid",
    annotations: { "autoscaling.knative.dev/class": "snooze.dev", ...annotations },
  },
  spec: {
    scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen-00001-deployment" },
    ...spec,
  },
});

const deployment = (port?: number) => ({
  metadata: { name: "qwen-00001-deployment", namespace: "team-a" },
  spec: { template: { spec: { containers: [{ ports: port ? [{ containerPort: port }] : [] }] } } },
});

describe("Knative's autoscaling annotations as Model settings", () => {
  test("each key keeps its meaning", () => {
    expect(
      knativeSettings({
        "autoscaling.knative.dev/window": "90s",
        "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "1m30s",
        "autoscaling.knative.dev/max-scale": "3",
        "autoscaling.knative.dev/target": "4.5",
        "autoscaling.knative.dev/initial-scale": "2",
      }),
    ).toEqual({ sleepAfter: "90s", zeroAfter: "1m30s", maxReplicas: 3 });
  });

  test("min-scale is a floor of pods (asleep when idle); the pods above it keep their retention period", () => {
    const spec = knativeSettings({
      "autoscaling.knative.dev/min-scale": "1",
      "autoscaling.knative.dev/max-scale": "3",
      "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "10s",
    });
    expect(spec).toEqual({ zeroAfter: "10s", minPods: 1, maxReplicas: 3 });
    // Without max-scale, as many pods as min-scale may run.
    expect(knativeSettings({ "autoscaling.knative.dev/min-scale": "3" })).toEqual({
      minPods: 3,
      maxReplicas: 3,
    });
    expect(knativeSettings({ "autoscaling.knative.dev/min-scale": "1" })).toEqual({ minPods: 1 });
  });

  test("Knative's aliases, max-scale 0 (no limit), containerConcurrency", () => {
    expect(
      knativeSettings(
        { "autoscaling.knative.dev/minScale": "5", "autoscaling.knative.dev/maxScale": "2" },
        8,
      ),
    ).toEqual({ minPods: 2, maxReplicas: 2, concurrency: 8 });
    expect(
      knativeSettings({ "autoscaling.knative.dev/min-scale": "2", "autoscaling.knative.dev/max-scale": "0" }),
    ).toEqual({ minPods: 2, maxReplicas: 10_000 });
    expect(knativeSettings({ "autoscaling.knative.dev/max-scale": "0" })).toEqual({ maxReplicas: 10_000 });
    // min-scale 0 is the default: no field; containerConcurrency 0 is "unlimited": no field either.
    expect(knativeSettings({ "autoscaling.knative.dev/min-scale": "0" }, 0)).toEqual({});
  });

  test("values Knative would refuse are left out, not guessed", () => {
    expect(
      knativeSettings({
        "autoscaling.knative.dev/window": "soon",
        "autoscaling.knative.dev/min-scale": "-1",
        "autoscaling.knative.dev/max-scale": "lots",
        "autoscaling.knative.dev/target": "0.5",
      }),
    ).toEqual({});
  });

  test("Go durations Snooze does not write are converted", () => {
    expect(goDuration("60s")).toBe("60s");
    expect(goDuration("1h0m0s")).toBe("1h0m0s");
    expect(goDuration("1500us")).toBe("2ms");
    expect(goDuration("0s")).toBe("0s");
    expect(goDuration("-1s")).toBeUndefined();
  });
});

describe("the Model of a Snooze-class revision", () => {
  test("named as the revision, owned by its PodAutoscaler, scaling its Deployment", () => {
    const result = modelForRevision(
      pa(
        {
          "snooze.dev/sleep-after": "5m",
          "snooze.dev/slot": "gpu-0",
          "autoscaling.knative.dev/window": "30s",
          "autoscaling.knative.dev/max-scale": "2",
        },
        { containerConcurrency: 4 },
      ),
      deployment(8000),
    );
    expect(result.problems).toBeUndefined();
    const model = result.model!;
    expect(model.metadata).toMatchObject({
      name: "qwen-00001",
      namespace: "team-a",
      labels: { "app.kubernetes.io/managed-by": "snooze-autoscaler" },
      ownerReferences: [
        {
          apiVersion: "autoscaling.internal.knative.dev/v1alpha1",
          kind: "PodAutoscaler",
          name: "qwen-00001",
          uid: "pa-uid",
          controller: true,
        },
      ],
    });
    // snooze.dev/sleep-after wins over Knative's window; the rest of Knative's keys apply.
    expect(model.spec).toEqual({
      workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen-00001-deployment" },
      port: 8000,
      sleepAfter: "5m",
      slot: "gpu-0",
      maxReplicas: 2,
      concurrency: 4,
    });
    expect(modelSpec.safeParse(model.spec).success).toBe(true);
  });

  test("aliases listed, and labels that place the revision in its Configuration; ready once its scale target is initialized", () => {
    const labelled: PodAutoscaler = {
      ...pa({ "snooze.dev/aliases": "chat", "snooze.dev/sleep-after": "1m" }),
    };
    labelled.metadata.labels = {
      "serving.knative.dev/configuration": "qwen",
      "serving.knative.dev/configurationGeneration": "1",
      "serving.knative.dev/revision": "qwen-00001",
    };
    const pending = modelForRevision(labelled, deployment()).model!;
    expect(pending.spec).toMatchObject({ aliases: ["chat"], sleepAfter: "1m" });
    expect(pending.metadata.labels).toEqual({
      "app.kubernetes.io/managed-by": "snooze-autoscaler",
      "serving.knative.dev/configuration": "qwen",
      "serving.knative.dev/configurationGeneration": "1",
    });
    // Ready for its Route once the scale target is initialized (its Model's status says so).
    expect(revisionReady(labelled)).toBe(false);
    labelled.status = { conditions: [{ type: "ScaleTargetInitialized", status: "True" }] };
    expect(revisionReady(labelled)).toBe(true);
    expect(modelForRevision(labelled, deployment()).model).toEqual(pending);
  });

  test("min-scale's Model keeps that many pods and is valid as a Model", () => {
    const model = modelForRevision(pa({ "autoscaling.knative.dev/min-scale": "3" }), deployment()).model!;
    expect(model.spec).toMatchObject({ minPods: 3, maxReplicas: 3 });
    expect(modelSpec.safeParse(model.spec).success).toBe(true);
  });

  test("an unreachable revision keeps no min-scale pods (Knative's ScaleBounds); reachable again, it does", () => {
    const kept = { "autoscaling.knative.dev/min-scale": "1" };
    const unreachable = modelForRevision(pa(kept, { reachability: "Unreachable" }), deployment()).model!;
    expect(unreachable.spec).not.toHaveProperty("minPods");
    expect(modelSpec.safeParse(unreachable.spec).success).toBe(true);
    for (const reachability of ["Reachable", "Unknown", undefined])
      expect(
        modelForRevision(pa(kept, { reachability }), deployment()).model!.spec,
        String(reachability),
      ).toMatchObject({ minPods: 1 });
    // The room min-scale makes above Snooze's default max stays: only the floor goes.
    const three = { "autoscaling.knative.dev/min-scale": "3" };
    const spec = modelForRevision(pa(three, { reachability: "Unreachable" }), deployment()).model!.spec;
    expect(spec).toMatchObject({ maxReplicas: 3 });
    expect(spec).not.toHaveProperty("minPods");
    // The cluster's min-scale is dropped too.
    const cluster = { ...knativeDefaults, minScale: 1 };
    expect(
      modelForRevision(pa({}, { reachability: "Unreachable" }), deployment(), cluster).model!.spec,
    ).not.toHaveProperty("minPods");
  });

  test("config-autoscaler's min-scale and max-scale apply where the revision's annotations say nothing", () => {
    const cluster = { ...knativeDefaults, minScale: 1, maxScale: 3 };
    expect(modelForRevision(pa({}), deployment(), cluster).model!.spec).toMatchObject({
      minPods: 1,
      maxReplicas: 3,
    });
    // The annotations win: min-scale 0 keeps no pod, max-scale 0 is no limit.
    const own = modelForRevision(
      pa({ "autoscaling.knative.dev/min-scale": "0", "autoscaling.knative.dev/max-scale": "0" }),
      deployment(),
      cluster,
    ).model!.spec;
    expect(own).toMatchObject({ maxReplicas: 10_000 });
    expect(own).not.toHaveProperty("minPods");
    expect(
      knativeSettings({ "autoscaling.knative.dev/max-scale": "2" }, undefined, { defaults: cluster }),
    ).toEqual({ minPods: 1, maxReplicas: 2 });
    // The cluster's min-scale 2 with no max anywhere: room for 2, as for the annotation.
    expect(knativeSettings({}, undefined, { defaults: { ...knativeDefaults, minScale: 2 } })).toEqual({
      minPods: 2,
      maxReplicas: 2,
    });
    // An annotation Knative would not parse falls back to the cluster's value, as in the KPA.
    expect(
      knativeSettings({ "autoscaling.knative.dev/max-scale": "lots" }, undefined, { defaults: cluster }),
    ).toEqual({ minPods: 1, maxReplicas: 3 });
    // Knative's own defaults (none, no limit): what no ConfigMap means.
    expect(knativeSettings({}, undefined, { defaults: knativeDefaults })).toEqual({});
  });

  test("config-autoscaler's stable-window and retention, when it sets them, where the annotations say nothing", () => {
    const cluster = { ...knativeDefaults, stableWindow: "90s", retention: "600000ms" };
    expect(knativeSettings({}, undefined, { defaults: cluster })).toEqual({
      sleepAfter: "90s",
      zeroAfter: "600000ms",
    });
    // The revision's annotations win, as in the KPA.
    expect(
      knativeSettings(
        {
          "autoscaling.knative.dev/window": "6s",
          "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "0s",
        },
        undefined,
        { defaults: cluster },
      ),
    ).toEqual({ sleepAfter: "6s", zeroAfter: "0s" });
  });

  test("the id is the revision's name; the engine's name comes from the container, or snooze.dev/model", () => {
    const serving = (args: string[]) => ({
      metadata: { name: "qwen-00001-deployment", namespace: "team-a" },
      spec: { template: { spec: { containers: [{ args }, { args: ["queue-proxy"] }] } } },
    });
    const fromArgs = modelForRevision(pa({}), serving(["Qwen/Qwen3-0.6B", "--served-model-name", "qwen"]));
    expect(fromArgs.model!.spec).toMatchObject({ servedModel: "qwen", port: 8080 });
    expect(fromArgs.model!.spec).not.toHaveProperty("model");
    expect(modelSpec.safeParse(fromArgs.model!.spec).success).toBe(true);
    // The positional model when no name is listed; the annotation wins over the args.
    expect(modelForRevision(pa({}), serving(["Qwen/Qwen3-0.6B"])).model!.spec).toMatchObject({
      servedModel: "Qwen/Qwen3-0.6B",
    });
    const annotated = modelForRevision(
      pa({ "snooze.dev/model": "chat" }),
      serving(["x", "--served-model-name", "qwen"]),
    );
    expect(annotated.model!.spec).toMatchObject({ servedModel: "chat" });
    expect(annotated.model!.spec).not.toHaveProperty("model");
    // Nothing to read (no Deployment yet): the engine is taken to serve the revision's name.
    expect(modelForRevision(pa({}), deployment()).model!.spec).not.toHaveProperty("servedModel");
  });

  test("a bad snooze.dev value makes no Model and says which and why", () => {
    const result = modelForRevision(pa({ "snooze.dev/sleep-after": "soon" }), deployment());
    expect(result.model).toBeUndefined();
    expect(result.problems?.join()).toMatch(/snooze\.dev\/sleep-after="soon": expected a duration/);
  });

  test("a scale target that is not an apps/v1 Deployment makes no Model", () => {
    const result = modelForRevision(pa({}, { scaleTargetRef: { apiVersion: "v1", kind: "Pod", name: "x" } }));
    expect(result.problems?.join()).toMatch(/apps\/v1 Deployment/);
  });
});
