import {
  AppsV1Api,
  CoreV1Api,
  DiscoveryV1Api,
  PatchStrategy,
  setHeaderOptions,
  type V1Deployment,
  type V1Pod,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { errorText } from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import { startStandInKubelet } from "./harness/stand-in-kubelet.ts";
import { suiteCluster } from "./harness/suite.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Deployments → ReplicaSets → Pods by the real kube-controller-manager; the stand-in kubelet binds
 * the pods, runs a `snooze sim` on each pod's own IP and reports Ready from the sim's /health.
 */
const cluster = suiteCluster();
const apps = cluster.admin.makeApiClient(AppsV1Api);
const core = cluster.admin.makeApiClient(CoreV1Api);
const { kubelet } = cluster.info;
let ns: Awaited<ReturnType<typeof createTestNamespace>>;

const labels = { app: "sim", [kubelet.selector.key]: kubelet.selector.value };

function simDeployment(replicas: number, podLabels: Record<string, string> = labels): V1Deployment {
  return {
    metadata: { name: "sim" },
    spec: {
      replicas,
      selector: { matchLabels: podLabels },
      template: {
        metadata: { labels: podLabels },
        spec: {
          schedulerName: kubelet.schedulerName,
          terminationGracePeriodSeconds: 5,
          containers: [
            {
              name: "vllm",
              image: "vllm/vllm-openai:v0.11.0",
              args: [
                "Qwen/Qwen3-0.6B",
                "--served-model-name",
                "qwen",
                "--enable-sleep-mode",
                "--load-time",
                "300ms",
              ],
              env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
              ports: [{ name: "http", containerPort: 8000 }],
              readinessProbe: { httpGet: { path: "/health", port: "http" }, periodSeconds: 1 },
            },
          ],
        },
      },
    },
  };
}

const simPods = async () =>
  (await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=sim" })).items.filter(
    (p) => !p.metadata?.deletionTimestamp,
  );
const isReady = (p: V1Pod) =>
  p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True") ?? false;
const get = (url: string) => fetch(url, { signal: AbortSignal.timeout(5_000) });
/** Whether a sim answers /health on `ip`. A removed pod address does not even refuse: 1 s is enough. */
const answers = (ip: string) =>
  fetch(`http://${ip}:8000/health`, { signal: AbortSignal.timeout(1_000) }).then(
    (response) => response.ok,
    () => false,
  );
let lastSeen = "";
const seen = (pods: V1Pod[]) => {
  lastSeen = pods
    .map(
      (p) =>
        `${p.metadata?.name} ${p.status?.phase} ready=${isReady(p)} deleting=${!!p.metadata?.deletionTimestamp}`,
    )
    .join("; ");
  return pods;
};
const kubeletLog = () => `pods: ${lastSeen}`;

beforeAll(async () => {
  ns = await createTestNamespace(cluster.admin, "snooze-e2e-pods");
});

afterAll(async () => {
  await ns?.remove();
});

describe("pods of a Deployment labelled for the stand-in kubelet", () => {
  let podIPs: string[] = [];

  test("become Running and Ready, each with its own IP on which its sim answers", async () => {
    await apps.createNamespacedDeployment({ namespace: ns.name, body: simDeployment(2) });
    await waitFor(
      async () => {
        const d = await apps.readNamespacedDeployment({ name: "sim", namespace: ns.name });
        return d.status?.readyReplicas === 2 && d.status.availableReplicas === 2 ? true : undefined;
      },
      { what: "2 ready replicas of Deployment sim", timeoutMs: 60_000, intervalMs: 200, detail: kubeletLog },
    );
    const pods = await simPods();
    expect(pods).toHaveLength(2);
    for (const pod of pods) {
      expect(pod.spec?.nodeName).toBe(kubelet.nodeName);
      expect(pod.status?.phase).toBe("Running");
      expect(isReady(pod)).toBe(true);
    }
    podIPs = pods.map((p) => p.status?.podIP ?? "");
    expect(new Set(podIPs).size).toBe(2);
    if (kubelet.network === "netns") for (const ip of podIPs) expect(ip).not.toMatch(/^127\./);

    for (const ip of podIPs) {
      const models = (await (await get(`http://${ip}:8000/v1/models`)).json()) as { data: { id: string }[] };
      expect(models.data.map((m) => m.id)).toContain("qwen");
      // The pod's flags reached the sim: the sleep API exists (--enable-sleep-mode, dev mode env).
      const sleeping = (await (await get(`http://${ip}:8000/is_sleeping`)).json()) as {
        is_sleeping: boolean;
      };
      expect(sleeping.is_sleeping).toBe(false);
    }
  });

  test.runIf(kubelet.network === "netns")("a Service over them gets the pod IPs as endpoints", async () => {
    await core.createNamespacedService({
      namespace: ns.name,
      body: {
        metadata: { name: "sim" },
        spec: { selector: { app: "sim" }, ports: [{ name: "http", port: 8000, targetPort: "http" }] },
      },
    });
    const discovery = cluster.admin.makeApiClient(DiscoveryV1Api);
    const addresses = await waitFor(
      async () => {
        const slices = await discovery.listNamespacedEndpointSlice({
          namespace: ns.name,
          labelSelector: "kubernetes.io/service-name=sim",
        });
        const ready = slices.items.flatMap((s) =>
          (s.endpoints ?? []).filter((e) => e.conditions?.ready).flatMap((e) => e.addresses),
        );
        return ready.length === 2 ? ready.sort() : undefined;
      },
      { what: "EndpointSlice of Service sim with 2 ready addresses", timeoutMs: 30_000, intervalMs: 200 },
    );
    expect(addresses).toEqual([...podIPs].sort());
  });

  test("scaling down removes a pod and stops its sim; deleting the Deployment stops the rest", async () => {
    await apps.patchNamespacedDeploymentScale({
      name: "sim",
      namespace: ns.name,
      body: [{ op: "replace", path: "/spec/replicas", value: 1 }],
    });
    const remaining = await waitFor(
      async () => {
        const all = seen(
          (await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=sim" })).items,
        );
        return all.length === 1 ? all : undefined;
      },
      { what: "one pod left after scaling to 1", timeoutMs: 30_000, intervalMs: 200, detail: kubeletLog },
    );
    const keptIP = remaining[0]!.status?.podIP;
    const goneIP = podIPs.find((ip) => ip !== keptIP)!;
    expect(await answers(goneIP)).toBe(false);
    expect(await answers(keptIP!)).toBe(true);

    await apps.deleteNamespacedDeployment({
      name: "sim",
      namespace: ns.name,
      propagationPolicy: "Foreground",
    });
    await waitFor(
      async () => {
        const all = seen(
          (await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=sim" })).items,
        );
        return all.length === 0 ? true : undefined;
      },
      {
        what: "no pods after deleting the Deployment",
        timeoutMs: 30_000,
        intervalMs: 200,
        detail: kubeletLog,
      },
    );
    expect(await answers(keptIP!)).toBe(false);
  });
});

describe("loopback pod addresses", () => {
  test("the apiserver accepts them as pod IPs but refuses them in EndpointSlices", async () => {
    // Why the stand-in kubelet gives pods addresses in a network namespace when it can.
    await core.createNamespacedPod({
      namespace: ns.name,
      body: {
        metadata: { name: "loopback" },
        spec: { nodeName: kubelet.nodeName, containers: [{ name: "c", image: "x" }] },
      },
    });
    const patched = await core.patchNamespacedPodStatus(
      {
        name: "loopback",
        namespace: ns.name,
        body: { status: { podIP: "127.1.0.9", podIPs: [{ ip: "127.1.0.9" }] } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    expect(patched.status?.podIP).toBe("127.1.0.9");

    const refused = await cluster.admin
      .makeApiClient(DiscoveryV1Api)
      .createNamespacedEndpointSlice({
        namespace: ns.name,
        body: {
          metadata: { name: "loopback" },
          addressType: "IPv4",
          endpoints: [{ addresses: ["127.1.0.9"] }],
          ports: [{ port: 8000 }],
        },
      })
      .catch((error: unknown) => error);
    expect(errorText(refused)).toMatch(/may not be in the loopback range/);
    // No kubelet runs this pod: remove it at once, or its namespace could not finish deleting.
    await core.deleteNamespacedPod({ name: "loopback", namespace: ns.name, body: { gracePeriodSeconds: 0 } });
  });

  test("a stand-in kubelet in loopback mode runs sims on 127.x addresses", async () => {
    const own = await startStandInKubelet(cluster.info.kubeconfigPath, cluster.admin, cluster.info.dir, {
      nodeName: "snooze-stand-in-loopback",
      network: "loopback",
      selectorValue: "loopback",
    });
    try {
      const loopbackLabels = { app: "sim-lo", [own.selector.key]: own.selector.value };
      const body = simDeployment(1, loopbackLabels);
      body.metadata = { name: "sim-lo" };
      await apps.createNamespacedDeployment({ namespace: ns.name, body });
      const pod = await waitFor(
        async () => {
          const pods = (await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=sim-lo" }))
            .items;
          return pods.find(isReady);
        },
        {
          what: "a ready pod on the loopback kubelet",
          timeoutMs: 60_000,
          intervalMs: 200,
          detail: () => own.process.tail(),
        },
      );
      expect(pod.spec?.nodeName).toBe("snooze-stand-in-loopback");
      expect(pod.status?.podIP).toMatch(/^127\.1\./);
      expect(await answers(pod.status!.podIP!)).toBe(true);
      await apps.deleteNamespacedDeployment({
        name: "sim-lo",
        namespace: ns.name,
        propagationPolicy: "Foreground",
      });
      // Gone before its kubelet stops, which would leave it terminating forever.
      await waitFor(
        async () =>
          (await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=sim-lo" })).items.length ===
          0
            ? true
            : undefined,
        { what: "the loopback pod deleted", timeoutMs: 30_000, intervalMs: 200 },
      );
      expect(await answers(pod.status!.podIP!)).toBe(false);
    } finally {
      await own.stop();
    }
  });
});
