import { describe, expect, test } from "vitest";
import { type Pod, podAddress, replicaEventForPod } from "./pod-replica.ts";

const pod = (
  annotations: Record<string, string>,
  ready: boolean,
  extra: Partial<Pod["metadata"]> = {},
): Pod => ({
  metadata: {
    name: "qwen-1",
    namespace: "ns",
    creationTimestamp: "2026-01-01T00:00:00Z",
    annotations,
    ...extra,
  },
  status: {
    phase: "Running",
    podIP: "10.0.0.7",
    conditions: [{ type: "Ready", status: ready ? "True" : "False" }],
  },
});

describe("a pod as a replica, as the activator sees it", () => {
  test("a starting or waking pod carries its activation's traceparent, so held requests link to it; other tiers none", () => {
    const traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    const annotated = (tier: string) =>
      pod({ "snooze.dev/tier": tier, "snooze.dev/activation-traceparent": traceparent }, tier === "ready");
    expect(replicaEventForPod("qwen", annotated("waking"), 8000).traceparent).toBe(traceparent);
    expect(replicaEventForPod("qwen", annotated("starting"), 8000).traceparent).toBe(traceparent);
    expect(replicaEventForPod("qwen", annotated("ready"), 8000).traceparent).toBeUndefined();
    expect(replicaEventForPod("qwen", annotated("asleep-1"), 8000).traceparent).toBeUndefined();
    expect(replicaEventForPod("qwen", pod({ "snooze.dev/tier": "waking" }, false), 8000)).not.toHaveProperty(
      "traceparent",
    );
  });

  test("a draining pod carries when its drain ends, so every activator ends what still runs then; other tiers none", () => {
    const endsAt = "2026-01-01T00:02:00.000Z";
    const annotated = (tier: string) =>
      pod({ "snooze.dev/tier": tier, "snooze.dev/drain-ends-at": endsAt }, false);
    expect(replicaEventForPod("qwen", annotated("draining"), 8000).endsAt).toBe(Date.parse(endsAt));
    expect(replicaEventForPod("qwen", annotated("asleep-1"), 8000)).not.toHaveProperty("endsAt");
    expect(
      replicaEventForPod("qwen", pod({ "snooze.dev/tier": "draining" }, false), 8000),
    ).not.toHaveProperty("endsAt");
  });

  test("a pod drained because its engine stopped answering says so while it drains", () => {
    const annotated = (tier: string) =>
      pod({ "snooze.dev/tier": tier, "snooze.dev/unresponsive": "true" }, false);
    expect(replicaEventForPod("qwen", annotated("draining"), 8000).unresponsive).toBe(true);
    expect(replicaEventForPod("qwen", annotated("asleep-1"), 8000)).not.toHaveProperty("unresponsive");
    expect(
      replicaEventForPod("qwen", pod({ "snooze.dev/tier": "draining" }, false), 8000),
    ).not.toHaveProperty("unresponsive");
  });

  test("routable only when the autoscaler recorded ready and the pod is Ready", () => {
    const since = "2026-01-01T00:01:00.000Z";
    expect(
      replicaEventForPod(
        "qwen",
        pod({ "snooze.dev/tier": "ready", "snooze.dev/tier-since": since }, true),
        8000,
      ),
    ).toEqual({
      model: "qwen",
      replica: "qwen-1",
      address: "10.0.0.7:8000",
      tier: "ready",
      since: Date.parse(since),
    });
    // Ready recorded, but the kubelet says the probe fails: held requests keep waiting, none is sent.
    expect(replicaEventForPod("qwen", pod({ "snooze.dev/tier": "ready" }, false), 8000).tier).toBe("waking");
  });

  test("routable once recorded ready with its probe passing, before the kubelet folds the awake gate into Ready", () => {
    const gated = (containersReady: boolean): Pod => ({
      ...pod({ "snooze.dev/tier": "ready" }, false),
      status: {
        phase: "Running",
        podIP: "10.0.0.7",
        conditions: [
          { type: "ContainersReady", status: containersReady ? "True" : "False" },
          { type: "snooze.dev/awake", status: "True" },
          { type: "Ready", status: "False" },
        ],
      },
    });
    expect(replicaEventForPod("qwen", gated(true), 8000).tier).toBe("ready");
    expect(replicaEventForPod("qwen", gated(false), 8000).tier).toBe("waking");
  });

  test("asleep, draining and unrecorded pods are never routable", () => {
    for (const tier of ["asleep-1", "asleep-2", "draining", "waking"])
      expect(replicaEventForPod("qwen", pod({ "snooze.dev/tier": tier }, true), 8000).tier).toBe(tier);
    // A new pod the autoscaler has not warmed up yet, or a tier this version does not know.
    expect(replicaEventForPod("qwen", pod({}, true), 8000).tier).toBe("starting");
    expect(replicaEventForPod("qwen", pod({ "snooze.dev/tier": "napping" }, true), 8000).tier).toBe(
      "starting",
    );
  });

  test("a pod being deleted, or finished, is cold and has no address", () => {
    const deleting = pod({ "snooze.dev/tier": "ready" }, true, { deletionTimestamp: "2026-01-01T00:02:00Z" });
    const gone = replicaEventForPod("qwen", deleting, 8000);
    expect(gone.tier).toBe("cold");
    expect(gone.address).toBeUndefined();
    const finished = pod({ "snooze.dev/tier": "ready" }, true);
    finished.status!.phase = "Failed";
    expect(replicaEventForPod("qwen", finished, 8000).tier).toBe("cold");
  });

  test("IPv6 pod addresses are bracketed", () => {
    const v6 = pod({}, true);
    v6.status!.podIP = "fd00::7";
    expect(podAddress(v6, 8000)).toBe("[fd00::7]:8000");
  });
});
