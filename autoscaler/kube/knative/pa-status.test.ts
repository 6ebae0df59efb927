import { describe, expect, test } from "vitest";
import type { ModelStatusInput } from "../../../lib/kube/model-resource.ts";
import { knativeDefaults } from "./autoscaler-config.ts";
import { initializedAt, type PaObservation, podAutoscalerStatus, sameStatus } from "./pa-status.ts";
import type { PodAutoscaler } from "./revision-model.ts";

const t0 = Date.parse("2026-01-01T00:00:00Z");
const pa = (annotations: Record<string, string> = {}, status?: PodAutoscaler["status"]): PodAutoscaler => ({
  metadata: { name: "qwen-00001", namespace: "team-a", generation: 3, annotations },
  spec: { reachability: "Reachable" },
  status,
});
const sks = { status: { serviceName: "qwen-00001", privateServiceName: "qwen-00001-private" } };
const model = (phase: ModelStatusInput["phase"], reason = "", message = ""): ModelStatusInput => ({
  phase,
  conditions: [{ type: "Ready", status: phase === "Ready" ? "True" : "False", reason, message }],
});
const observe = (o: Partial<PaObservation>): PaObservation => ({
  pa: pa(),
  podsUp: 0,
  now: t0,
  ...o,
});
const cond = (status: ReturnType<typeof podAutoscalerStatus>, type: string) =>
  status.conditions?.find((c) => c.type === type);

describe("a Snooze-class PodAutoscaler's status", () => {
  test("a pod awake, the SKS in place: Active, initialized, SKSReady, Ready; scales and names", () => {
    const status = podAutoscalerStatus(
      observe({ model: model("Ready"), deploymentReplicas: 1, podsUp: 1, sks }),
    );
    expect(status).toMatchObject({
      observedGeneration: 3,
      serviceName: "qwen-00001",
      metricsServiceName: "qwen-00001-private",
      desiredScale: 1,
      actualScale: 1,
    });
    for (const type of ["Active", "ScaleTargetInitialized", "SKSReady", "Ready"])
      expect(cond(status, type)).toMatchObject({
        status: "True",
        lastTransitionTime: "2026-01-01T00:00:00Z",
      });
  });

  test("starting: Active Unknown (Queued) and Ready Unknown until the pod is up", () => {
    const status = podAutoscalerStatus(observe({ model: model("Starting"), deploymentReplicas: 1, sks }));
    expect(cond(status, "Active")).toMatchObject({ status: "Unknown", reason: "Queued" });
    expect(cond(status, "ScaleTargetInitialized")).toMatchObject({
      status: "Unknown",
      reason: "Initializing",
    });
    expect(cond(status, "Ready")).toMatchObject({ status: "Unknown", reason: "Queued" });
  });

  test("a pod kept after its start failed (before the initial scale): Active and Ready Unknown with why while kept, False once let go", () => {
    // False before the scale target is initialized makes Knative mark the revision failed at once
    // ("Initial scale was never achieved"), though the kubelet may yet start the pod.
    const why =
      'start of qwen-00001 failed: pod qwen-00001-deployment-x cannot start: ImagePullBackOff: Back-off pulling image "r.invalid/v:1"';
    const starting = model("Starting", "Starting", "1 replica starting");
    starting.conditions!.push({
      type: "ActivationFailed",
      status: "True",
      reason: "ActivationFailed",
      message: why,
    });
    const status = podAutoscalerStatus(observe({ model: starting, deploymentReplicas: 1, sks }));
    expect(cond(status, "Active")).toMatchObject({
      status: "Unknown",
      reason: "ActivationFailed",
      message: why,
    });
    expect(cond(status, "ScaleTargetInitialized")).toMatchObject({ status: "Unknown" });
    expect(cond(status, "Ready")).toMatchObject({
      status: "Unknown",
      reason: "ActivationFailed",
      message: why,
    });
    expect(status.conditions?.some((c) => c.status === "False")).toBe(false);
    // Let go past the progress deadline (the Deployment at 0, the pod still terminating, the
    // Model still Starting): False at once, so the Revision Knative failed stays failed.
    const letGo = podAutoscalerStatus(
      observe({ pa: pa({}, status), model: starting, deploymentReplicas: 0, podsUp: 0, sks }),
    );
    expect(cond(letGo, "Active")).toMatchObject({
      status: "False",
      reason: "ActivationFailed",
      message: why,
    });
    expect(cond(letGo, "Ready")).toMatchObject({ status: "False", reason: "ActivationFailed" });
    // Once initialized no pod is kept: a new start after an earlier failure is Queued, as any.
    const initialized = podAutoscalerStatus(
      observe({ model: model("Ready"), deploymentReplicas: 1, podsUp: 1, sks }),
    );
    const again = podAutoscalerStatus(
      observe({ pa: pa({}, initialized), model: starting, deploymentReplicas: 1, sks, now: t0 + 60_000 }),
    );
    expect(cond(again, "Active")).toMatchObject({ status: "Unknown", reason: "Queued" });
  });

  test("asleep: Inactive with the Model's reason, initialized stays, the pod still counts as actual", () => {
    const before = podAutoscalerStatus(
      observe({ model: model("Ready"), deploymentReplicas: 1, podsUp: 1, sks }),
    );
    const later = t0 + 60_000;
    const status = podAutoscalerStatus(
      observe({
        pa: pa({}, before),
        model: model("Asleep", "Asleep", "1 replica asleep"),
        deploymentReplicas: 1,
        podsUp: 1,
        sks,
        now: later,
      }),
    );
    expect(cond(status, "Active")).toMatchObject({
      status: "False",
      reason: "Asleep",
      message: "1 replica asleep; a request wakes one",
      lastTransitionTime: "2026-01-01T00:01:00Z",
    });
    // Unchanged conditions keep the time they last changed.
    expect(cond(status, "ScaleTargetInitialized")).toMatchObject({
      status: "True",
      lastTransitionTime: "2026-01-01T00:00:00Z",
    });
    expect(cond(status, "Ready")).toMatchObject({ status: "False", reason: "Asleep" });
    expect(status).toMatchObject({ desiredScale: 1, actualScale: 1 });
  });

  test("the Deployment at 0 and no pod while the Model still says Asleep (its status lags): NoTraffic", () => {
    const status = podAutoscalerStatus(
      observe({
        model: model("Asleep", "Asleep", "1 replica asleep"),
        deploymentReplicas: 0,
        podsUp: 0,
        sks,
      }),
    );
    expect(cond(status, "Active")).toMatchObject({ status: "False", reason: "NoTraffic" });
    expect(status).toMatchObject({ desiredScale: 0, actualScale: 0 });
  });

  test("scaled to zero: NoTraffic like the KPA; the scale target stays initialized", () => {
    const before = podAutoscalerStatus(
      observe({ model: model("Ready"), deploymentReplicas: 1, podsUp: 1, sks }),
    );
    const status = podAutoscalerStatus(
      observe({ pa: pa({}, before), model: model("Cold"), deploymentReplicas: 0, podsUp: 0, sks }),
    );
    expect(cond(status, "Active")).toMatchObject({ status: "False", reason: "NoTraffic" });
    expect(cond(status, "ScaleTargetInitialized")?.status).toBe("True");
    expect(status).toMatchObject({ desiredScale: 0, actualScale: 0 });
  });

  test("no SKS yet: SKSReady Unknown and the target not initialized even with a pod up", () => {
    const status = podAutoscalerStatus(observe({ model: model("Ready"), deploymentReplicas: 1, podsUp: 1 }));
    expect(cond(status, "SKSReady")).toMatchObject({ status: "Unknown", reason: "NotReady" });
    expect(cond(status, "ScaleTargetInitialized")?.status).toBe("Unknown");
    expect(status.serviceName).toBeUndefined();
  });

  test("invalid snooze.dev annotations: Inactive with the problems, Ready False", () => {
    const status = podAutoscalerStatus(
      observe({ problems: ['snooze.dev/sleep-after="soon": expected a duration'], sks }),
    );
    expect(cond(status, "Active")).toMatchObject({ status: "False", reason: "InvalidSettings" });
    expect(cond(status, "Ready")?.message).toMatch(/snooze\.dev\/sleep-after="soon"/);
  });

  test("invalid snooze.dev annotations: the scale target is never initialized, even with Knative's first pod up", () => {
    // Knative creates the revision's Deployment with its initial scale; that pod comes up though no
    // Model runs it. Counted as initialized, the Revision was Ready and the Route moved the
    // Service's traffic to a revision Snooze cannot route (every request 503 revision_not_served).
    // Not initialized and Ready False, Knative marks the revision failed and keeps the old one routed.
    const problems = ['snooze.dev/sleep-level="3": expected 1 or 2'];
    const status = podAutoscalerStatus(observe({ problems, deploymentReplicas: 1, podsUp: 1, sks }));
    expect(cond(status, "ScaleTargetInitialized")).toMatchObject({
      status: "False",
      reason: "InvalidSettings",
      message: expect.stringContaining('snooze.dev/sleep-level="3"'),
    });
    expect(cond(status, "Ready")).toMatchObject({ status: "False", reason: "InvalidSettings" });
    // Scaled away (below), it stays so, and says the same.
    const after = podAutoscalerStatus(
      observe({ pa: pa({}, status), problems, deploymentReplicas: 0, podsUp: 0, sks }),
    );
    expect(cond(after, "ScaleTargetInitialized")?.status).toBe("False");
    expect(after).toMatchObject({ desiredScale: 0, actualScale: 0 });
  });

  test("initialized at max(min-scale, initial-scale), initial-scale 1 by default", () => {
    expect(initializedAt(pa())).toBe(1);
    // initial-scale 0 counts only with config-autoscaler's allow-zero-initial-scale (Knative's
    // GetInitialScale); else config-autoscaler's initial-scale does.
    expect(initializedAt(pa({ "autoscaling.knative.dev/initial-scale": "0" }))).toBe(1);
    expect(
      initializedAt(pa({ "autoscaling.knative.dev/initial-scale": "0" }), {
        ...knativeDefaults,
        allowZeroInitialScale: true,
      }),
    ).toBe(0);
    expect(initializedAt(pa({ "autoscaling.knative.dev/min-scale": "2" }))).toBe(2);
    expect(
      initializedAt(
        pa({ "autoscaling.knative.dev/minScale": "1", "autoscaling.knative.dev/initialScale": "3" }),
      ),
    ).toBe(3);
    const two = pa({ "autoscaling.knative.dev/min-scale": "2" });
    const one = podAutoscalerStatus(
      observe({ pa: two, model: model("Ready"), deploymentReplicas: 2, podsUp: 1, sks }),
    );
    expect(cond(one, "ScaleTargetInitialized")?.status).toBe("Unknown");
  });

  test("config-autoscaler's min-scale and initial-scale where the annotations say nothing", () => {
    const defaults = { ...knativeDefaults, minScale: 2, initialScale: 3, allowZeroInitialScale: true };
    expect(initializedAt(pa(), defaults)).toBe(3);
    expect(initializedAt(pa(), { ...defaults, initialScale: 0 })).toBe(2);
    // The annotations win.
    expect(
      initializedAt(
        pa({ "autoscaling.knative.dev/min-scale": "0", "autoscaling.knative.dev/initial-scale": "1" }),
        defaults,
      ),
    ).toBe(1);
    // Unreachable: no min-scale, the cluster's neither.
    const unreachable = { ...pa(), spec: { reachability: "Unreachable" } };
    expect(initializedAt(unreachable, { ...defaults, initialScale: 0 })).toBe(0);
    const status = podAutoscalerStatus(
      observe({ model: model("Ready"), deploymentReplicas: 3, podsUp: 2, sks, defaults }),
    );
    expect(cond(status, "ScaleTargetInitialized")).toMatchObject({
      status: "Unknown",
      message: "waiting for 3 pods to be up (2 up)",
    });
  });

  test("sameStatus ignores key order and severity, not a changed field", () => {
    const a = podAutoscalerStatus(observe({ model: model("Ready"), deploymentReplicas: 1, podsUp: 1, sks }));
    const reordered = JSON.parse(JSON.stringify({ ...a, conditions: [...a.conditions!].reverse() }));
    expect(sameStatus(reordered, a)).toBe(true);
    expect(sameStatus({ ...a, actualScale: 2 }, a)).toBe(false);
    expect(sameStatus(undefined, a)).toBe(false);
  });
});
