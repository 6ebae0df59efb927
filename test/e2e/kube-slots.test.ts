import { join } from "node:path";
import { describe, expect, test } from "vitest";
import { isResident } from "../../autoscaler/slot-arbiter.ts";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import type { Tier } from "../../lib/replica-event.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { complete, modelObject, simDeployment, simState, tierOf } from "./components/snooze.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Two Models share one slot (one simulated GPU: the sims of both Deployments claim the same GPU,
 * and a second awake engine would not fit, exactly as vLLM fails). Requests alternate between them;
 * the autoscaler that holds the slot's Lease swaps them, and at no moment are two pods resident.
 */
const slot = `gpu-e2e-${Math.random().toString(36).slice(2, 6)}`;
const models = ["qwen", "llama"];
const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-slots",
  objects: async ({ admin, ns, cluster }) => {
    const gpu = ["--gpu-id", slot, "--gpu-dir", join(cluster.info.dir, "gpu"), "--gpu-memory", "24GiB"];
    for (const model of models) {
      await admin.createDeployment(ns.name, simDeployment(cluster, model, { model, extraArgs: gpu }));
      await admin.createModel(ns.name, modelObject(model, { model, slot, sleepAfter: "1m", port: 8000 }));
    }
    await admin.client.create(`/apis/snooze.dev/v1alpha1/namespaces/${ns.name}/slots`, {
      apiVersion: "snooze.dev/v1alpha1",
      kind: "Slot",
      metadata: { name: slot },
      spec: { policy: "sticky", minResidency: "0s", swapCooldown: "0s", drainTimeout: "10s" },
    });
  },
  autoscaler: "autoscaler-slots",
  activator: "activator-slots",
});

/** Polls every pod of both models: the most resident at once, and when two were seen. */
function residencyMonitor() {
  let max = 0;
  let worst = "";
  let stopped = false;
  const done = (async () => {
    while (!stopped) {
      const pods: Pod[] = (await Promise.all(models.map((m) => suite.admin.pods(suite.ns.name, m)))).flat();
      // A pod without a tier yet is starting; a pod on its way out of the slot is not resident.
      const residents = pods.filter((p) => isResident((tierOf(p) ?? "starting") as Tier));
      if (residents.length > max) {
        max = residents.length;
        worst = residents.map((p) => `${p.metadata.name}=${tierOf(p) ?? "(none)"}`).join(", ");
      }
      await new Promise((r) => setTimeout(r, 30));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await done;
      return { max, worst };
    },
  };
}

const logs = () => suite.logs(30, 10);

describe("a slot with two Models on Kubernetes", () => {
  test("requests alternating between the two swap them, never with two resident", async () => {
    const monitor = residencyMonitor();
    const timings: string[] = [];
    try {
      for (const model of ["qwen", "llama", "qwen", "llama"]) {
        const answer = await complete(suite.activator.url, model);
        expect(answer.status, `${model}: ${answer.text}\n${logs()}`).toBe(200);
        timings.push(`${model} ${Math.round(answer.ms)}ms`);
      }
    } finally {
      const { max, worst } = await monitor.stop();
      expect(max, `two resident at once: ${worst}`).toBe(1);
    }
    console.log(`e2e: slot swaps through the activator: ${timings.join(", ")}`);
    // One pod per model: the second visit woke a sleeper instead of starting a pod.
    for (const model of models) expect(await suite.admin.pods(suite.ns.name, model)).toHaveLength(1);
    const [qwen] = await suite.admin.pods(suite.ns.name, "qwen");
    const [llama] = await suite.admin.pods(suite.ns.name, "llama");
    expect(tierOf(qwen!)).toBe("asleep-1");
    expect(tierOf(llama!)).toBe("ready");
    for (const pod of [qwen!, llama!])
      expect((await simState(pod.status!.podIP!)).arrivedWhileAsleep).toBe(0);
    const state = await suite.autoscaler.state();
    const slotState = state.units.find((u: any) => u.key === `slot:${slot}`).slots[0];
    expect(slotState.maxResidents).toBe(1);
    expect(slotState.swapCount).toBeGreaterThanOrEqual(3);
  }, 120_000);

  test("the Slot's status names its members, the resident and the swaps", async () => {
    const status = await waitFor(
      async () => {
        const s = (
          await suite.admin.client.get<any>(
            `/apis/snooze.dev/v1alpha1/namespaces/${suite.ns.name}/slots/${slot}`,
          )
        ).status;
        return s?.resident === "llama" && s.swapCount >= 3 ? s : undefined;
      },
      { what: "Slot status", timeoutMs: 10_000, detail: logs },
    );
    expect(status.members).toEqual(["llama", "qwen"]);
    expect(status.lastSwap).toMatchObject({ from: "qwen", to: "llama" });
    const lease = await suite.admin.client.get<any>(
      `/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases/snooze-slot-${slot}`,
    );
    expect(lease.spec.holderIdentity).toBe("autoscaler-slots");
  });
});
