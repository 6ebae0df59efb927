import { describe, expect, test } from "vitest";
import { modelStatus as modelStatusSchema } from "../lib/kube/model-resource.ts";
import { type ModelObservation, modelStatus } from "./model-status.ts";

const now = Date.parse("2026-03-01T10:00:00Z");
const base: ModelObservation = { replicas: [], pendingPods: 0, selector: "app=qwen", now, generation: 3 };

describe("modelStatus", () => {
  test("counts: replicas = ready + warming; per-pod tiers sorted; the written form parses", () => {
    const status = modelStatus({
      ...base,
      pendingPods: 1,
      lastWakeMs: 2_400,
      replicas: [
        { pod: "q-c", tier: "asleep-2", since: now - 5_000, podReady: true },
        { pod: "q-a", tier: "ready", since: now - 1_000, podReady: true },
        { pod: "q-b", tier: "waking", since: now, podReady: true },
        { pod: "q-d", tier: "ready", since: now, podReady: false },
      ],
    });
    expect(status).toMatchObject({
      replicas: 4,
      readyReplicas: 1,
      warmingReplicas: 3,
      sleepingReplicas: 1,
      selector: "app=qwen",
      phase: "Ready",
      observedGeneration: 3,
      lastWakeDuration: "2.4s",
    });
    expect(status.replicaTiers?.map((r) => r.pod)).toEqual(["q-a", "q-b", "q-c", "q-d"]);
    expect(status.conditions?.[0]).toMatchObject({ type: "Ready", status: "True", reason: "ReplicaReady" });
    expect(modelStatusSchema.safeParse(status).success).toBe(true);
  });

  test.each([
    [[{ tier: "waking" }], "Waking", "Waking"],
    [[{ tier: "starting" }], "Starting", "Starting"],
    [[{ tier: "asleep-1" }], "Asleep", "Asleep"],
    [[{ tier: "draining" }], "Asleep", "Draining"],
    [[], "Cold", "ScaledToZero"],
  ] as const)("%j → phase %s, reason %s", (replicas, phase, reason) => {
    const status = modelStatus({
      ...base,
      replicas: replicas.map((r, i) => ({ pod: `p${i}`, tier: r.tier, since: now, podReady: true })),
    });
    expect(status.phase).toBe(phase);
    expect(status.conditions?.[0]).toMatchObject({ status: "False", reason });
  });

  test("a Model whose id an older Model serves: Ready is False for ModelIdTaken, naming it, even with a replica ready", () => {
    const status = modelStatus({
      ...base,
      replicas: [{ pod: "q-a", tier: "ready", since: now, podReady: true }],
      servedInstead: { id: "qwen", by: "ml/qwen-old" },
    });
    expect(status.conditions?.[0]).toEqual({
      type: "Ready",
      status: "False",
      reason: "ModelIdTaken",
      message:
        'Model ml/qwen-old is older and serves the same model id "qwen", so every request for "qwen" goes there and none to this one: give this Model another spec.model, or delete one of the two',
      lastTransitionTime: "2026-03-01T10:00:00Z",
      observedGeneration: 3,
    });
    // Its counts stay the truth of its pods (the scale subresource reads them).
    expect(status).toMatchObject({ readyReplicas: 1, phase: "Ready" });
  });

  test("a Knative revision's Model says whether the revision is ready for its Route (RevisionReady); other Models say nothing", () => {
    const ready = (o: Partial<Parameters<typeof modelStatus>[0]>) =>
      modelStatus({ ...base, ...o }).conditions?.find((c) => c.type === "RevisionReady");
    expect(ready({})).toBeUndefined();
    expect(ready({ revisionReady: false })).toMatchObject({ status: "False", reason: "NotInitialized" });
    expect(ready({ revisionReady: true })).toMatchObject({
      status: "True",
      reason: "ScaleTargetInitialized",
    });
  });

  test("aliases another Model has: AliasesTaken names each and its holder; False again once all reach it", () => {
    const leftOut = [
      { alias: "shared", holder: "ml/qwen-old", asId: false },
      { alias: "llama", holder: "ml/llama", asId: true },
    ];
    const taken = modelStatus({ ...base, aliases: { leftOut } });
    expect(taken.conditions?.find((c) => c.type === "AliasesTaken")).toEqual({
      type: "AliasesTaken",
      status: "True",
      reason: "AliasTaken",
      message:
        'alias "shared" is listed by Model ml/qwen-old too, which is older and has it; alias "llama" is the model id of Model ml/llama: requests by these names go there, not here; give this Model other aliases, or take them from the other Model',
      lastTransitionTime: "2026-03-01T10:00:00Z",
      observedGeneration: 3,
    });
    expect(modelStatusSchema.safeParse(taken).success).toBe(true);
    const later = now + 60_000;
    const cleared = modelStatus({
      ...base,
      now: later,
      aliases: { leftOut: [] },
      previous: taken.conditions,
    });
    expect(cleared.conditions?.find((c) => c.type === "AliasesTaken")).toMatchObject({
      status: "False",
      reason: "AliasesServed",
      lastTransitionTime: new Date(later).toISOString().replace(/\.\d+Z$/, "Z"),
    });
    // No aliases listed: no such condition; a Model whose id another serves says that instead.
    expect(modelStatus(base).conditions?.some((c) => c.type === "AliasesTaken")).toBe(false);
    const shadowed = modelStatus({ ...base, aliases: { leftOut }, servedInstead: { id: "q", by: "ml/q" } });
    expect(shadowed.conditions?.some((c) => c.type === "AliasesTaken")).toBe(false);
  });

  test("a Model whose workload is missing: Ready is False for WorkloadNotFound with the platform's words; Failed once a start failed on it", () => {
    const missing = 'Deployment "qwen" (spec.workloadRef) does not exist in namespace "ml"';
    const cold = modelStatus({ ...base, workloadMissing: missing });
    expect(cold.phase).toBe("Cold");
    expect(cold.conditions?.[0]).toMatchObject({
      status: "False",
      reason: "WorkloadNotFound",
      message: missing,
    });
    const failed = modelStatus({
      ...base,
      workloadMissing: missing,
      lastError: `start of qwen failed: ${missing}`,
    });
    expect(failed.phase).toBe("Failed");
    expect(failed.conditions?.[0]).toMatchObject({ reason: "WorkloadNotFound" });
    expect(failed.conditions?.[1]).toMatchObject({ type: "ActivationFailed", status: "True" });
  });

  test("ReplicasCapped: a count above maxReplicas is said, with what to change; within it, False; unknown, absent", () => {
    const capped = modelStatus({ ...base, desired: 6, maxReplicas: 4 });
    const condition = capped.conditions?.find((c) => c.type === "ReplicasCapped");
    expect(condition).toMatchObject({ status: "True", reason: "AboveMaxReplicas", observedGeneration: 3 });
    expect(condition?.message).toBe(
      "spec.replicas 6 (a person's, an HPA's or KEDA's count) is above spec.maxReplicas 4: at most 4 run; " +
        "raise spec.maxReplicas, or lower the HPA's maxReplicas (a ScaledObject's maxReplicaCount) to 4",
    );
    expect(modelStatusSchema.safeParse(capped).success).toBe(true);
    const within = modelStatus({ ...base, desired: 4, maxReplicas: 4, previous: capped.conditions });
    expect(within.conditions?.find((c) => c.type === "ReplicasCapped")).toMatchObject({
      status: "False",
      reason: "WithinMaxReplicas",
    });
    expect(modelStatus(base).conditions?.map((c) => c.type)).toEqual(["Ready", "ActivationFailed"]);
  });

  test("a failed activation with nothing awake is phase Failed, with the reason in the conditions", () => {
    const status = modelStatus({ ...base, lastError: "start of qwen failed: boom" });
    expect(status.phase).toBe("Failed");
    expect(status.conditions?.[0]).toMatchObject({
      reason: "ActivationFailed",
      message: "start of qwen failed: boom",
    });
    expect(status.conditions?.[1]).toMatchObject({ type: "ActivationFailed", status: "True" });
  });

  test("with a failure, retryAt says when its back-off ends or ended (the activators' view on Kubernetes)", () => {
    const failing = { ...base, lastError: "start of qwen failed: boom" };
    const status = modelStatus({ ...failing, retryAt: now + 4_000 });
    expect(status.retryAt).toBe(new Date(now + 4_000).toISOString());
    expect(modelStatusSchema.safeParse(status).success).toBe(true);
    // Kept once it passed (it moves only with a new failure or an early end); none without a failure.
    expect(modelStatus({ ...failing, retryAt: now - 60_000 }).retryAt).toBe(
      new Date(now - 60_000).toISOString(),
    );
    expect(modelStatus({ ...base, retryAt: now + 4_000 }).retryAt).toBeUndefined();
  });

  test("lastTransitionTime moves only when a condition's status changes", () => {
    const first = modelStatus({ ...base, now: now - 60_000 });
    const same = modelStatus({ ...base, previous: first.conditions as never });
    expect(same.conditions?.[0]?.lastTransitionTime).toBe("2026-03-01T09:59:00Z");
    const changed = modelStatus({
      ...base,
      previous: first.conditions as never,
      replicas: [{ pod: "a", tier: "ready", since: now, podReady: true }],
    });
    expect(changed.conditions?.[0]?.lastTransitionTime).toBe("2026-03-01T10:00:00Z");
  });
});
