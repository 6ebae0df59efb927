import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { group, version } from "../../lib/kube/api-group.ts";
import { paths } from "../../lib/kube/client.ts";
import {
  autoscalingApi,
  conditionOf,
  findKnative,
  type Knative,
  type KnativeObject,
  knativeMissing,
  knativeService,
  kpaClass,
  networkingApi,
  queueSidecarImage,
  servingApi,
  startKnative,
  waitForCondition,
} from "./components/knative.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * A real Knative Serving (controller, webhook and KPA autoscaler built from the pinned module) on
 * the e2e control plane, with a Service that does not name Snooze's class: Knative creates the
 * Configuration, Revision, Deployment and a KPA-class PodAutoscaler, the revision's pods run under
 * the stand-in kubelet (the user container as a sim, the real queue-proxy beside it), Knative's
 * autoscaler sets the Deployment's scale, and Snooze's autoscaler, running beside it, leaves the
 * Service alone.
 */
const folder = findKnative();
const ingressClass = "e2e.ingress.snooze.dev";
const name = "hello";
const revision = `${name}-00001`;
let knative: Knative | undefined;

const suite = kubeSnoozeSuite({ namespace: "snooze-e2e-knative" });

beforeAll(async () => {
  if (!folder) throw new Error(knativeMissing());
  knative = await startKnative(suite.cluster, folder, { ingressClass });
}, 180_000);
afterAll(async () => {
  // Before the namespace goes: Knative's finalizers need its controller.
  await suite.admin.client
    .delete(`${servingApi}/namespaces/${suite.ns.name}/services/${name}`)
    .catch(() => {});
  await waitFor(
    async () =>
      (await suite.admin.client.list(`${servingApi}/namespaces/${suite.ns.name}/revisions`)).items.length ===
      0
        ? true
        : undefined,
    { what: "Knative to delete the Service's revisions", timeoutMs: 30_000 },
  ).catch((error: unknown) => console.warn(String(error)));
  await knative?.stop();
});

const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const logs = () => `${knative?.logs(15)}\n${suite.logs(10, 0)}`;
const get = (path: string) => client().get<KnativeObject>(path);
const appear = (what: string, path: string) =>
  waitFor(() => get(path), { what, timeoutMs: 30_000, intervalMs: 200, detail: logs });

interface Pod {
  metadata: { name: string; labels?: Record<string, string>; deletionTimestamp?: string };
  spec: { containers: { name: string; image: string }[] };
  status?: {
    podIP?: string;
    conditions?: { type: string; status: string }[];
    containerStatuses?: { name: string; ready: boolean }[];
  };
}
const revisionPods = async () =>
  (
    await client().list<Pod>(paths.pods(ns()), { labelSelector: `serving.knative.dev/revision=${revision}` })
  ).items.filter((p) => !p.metadata.deletionTimestamp);
const ready = (p: Pod) => p.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");
const deployment = () =>
  client().get<{
    metadata: {
      annotations?: Record<string, string>;
      managedFields?: { manager: string; fieldsV1?: unknown }[];
    };
    spec: { replicas: number };
  }>(`${paths.apps("deployments", ns())}/${revision}-deployment`);

describe("Knative Serving runs for real", () => {
  test("a Service without Snooze's class: Configuration, Revision, Deployment and a KPA PodAutoscaler", async () => {
    await client().create(
      `${servingApi}/namespaces/${ns()}/services`,
      knativeService(name, {
        kubelet: suite.cluster.info.kubelet,
        // Knative's controller creates the Deployment at the initial scale (default 1); only the
        // KPA brings it to min-scale.
        annotations: { "autoscaling.knative.dev/min-scale": "2" },
      }),
    );
    const configuration = await appear(
      "the Configuration",
      `${servingApi}/namespaces/${ns()}/configurations/${name}`,
    );
    expect(configuration.metadata.labels?.["serving.knative.dev/service"]).toBe(name);
    await appear("the Revision", `${servingApi}/namespaces/${ns()}/revisions/${revision}`);
    await waitFor(deployment, { what: "the revision's Deployment", timeoutMs: 30_000, detail: logs });
    const pa = await appear(
      "the PodAutoscaler",
      `${autoscalingApi}/namespaces/${ns()}/podautoscalers/${revision}`,
    );
    expect(pa.metadata.annotations?.["autoscaling.knative.dev/class"]).toBe(kpaClass);
  });

  test("its pods run under the stand-in kubelet, the real queue-proxy beside the sim, and become Ready", async () => {
    const pods = await waitFor(
      async () => ((p) => (p.length === 2 && p.every(ready) ? p : undefined))(await revisionPods()),
      { what: "two Ready revision pods", timeoutMs: 60_000, intervalMs: 250, detail: logs },
    );
    for (const pod of pods) {
      expect(pod.spec.containers.map((c) => c.name)).toEqual(["user-container", "queue-proxy"]);
      expect(pod.spec.containers[1]?.image).toBe(queueSidecarImage);
      expect(pod.status?.containerStatuses?.map((c) => [c.name, c.ready])).toEqual([
        ["user-container", true],
        ["queue-proxy", true],
      ]);
      // Through queue-proxy's serving port to the sim on the pod's 127.0.0.1:8080.
      const response = await fetch(`http://${pod.status?.podIP}:8012/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ model: name, prompt: "hello", max_tokens: 3 }),
        signal: AbortSignal.timeout(10_000),
      });
      expect(response.status).toBe(200);
      expect(((await response.json()) as { choices: unknown[] }).choices).toHaveLength(1);
    }
    await waitForCondition(client(), `${servingApi}/namespaces/${ns()}/revisions/${revision}`, "Ready", {
      detail: logs,
    });
  });

  test("Knative's autoscaler sets the Deployment's scale: min-scale 2, then 1", async () => {
    const paPath = `${autoscalingApi}/namespaces/${ns()}/podautoscalers/${revision}`;
    const pa = await waitFor(
      async () =>
        ((p) => (p.status?.desiredScale === 2 && p.status?.actualScale === 2 ? p : undefined))(
          await get(paPath),
        ),
      { what: "the PodAutoscaler at desired 2, actual 2", timeoutMs: 30_000, detail: logs },
    );
    // Its Ready condition is not asserted: it stayed Unknown here (why is not yet understood).
    expect(pa.metadata.annotations?.["autoscaling.knative.dev/class"]).toBe(kpaClass);
    const scaled = await deployment();
    expect(scaled.spec.replicas).toBe(2);
    // Created at 1 by the controller, scaled to 2 by the KPA as Knative's autoscaler binary.
    expect(scaled.metadata.managedFields?.map((f) => f.manager)).toContain("autoscaler");

    await client().patch(`${servingApi}/namespaces/${ns()}/services/${name}`, {
      spec: {
        template: {
          metadata: {
            annotations: {
              "autoscaling.knative.dev/min-scale": "1",
              "autoscaling.knative.dev/initial-scale": "1",
            },
          },
        },
      },
    });
    // A new revision (the template changed), scaled by the KPA to its min-scale of 1.
    const next = `${name}-00002`;
    await waitFor(
      async () => {
        const d = await client().get<{ spec: { replicas: number } }>(
          `${paths.apps("deployments", ns())}/${next}-deployment`,
        );
        const p = await get(`${autoscalingApi}/namespaces/${ns()}/podautoscalers/${next}`);
        return d.spec.replicas === 1 && p.status?.actualScale === 1 ? true : undefined;
      },
      {
        what: `${next}'s Deployment scaled to 1 by the KPA`,
        timeoutMs: 60_000,
        intervalMs: 250,
        detail: logs,
      },
    );
  });

  test("the Route's Ingress carries the configured class; without that class's implementation it is not Ready", async () => {
    const ingress = await appear(
      "the Route's Ingress",
      `${networkingApi}/namespaces/${ns()}/ingresses/${name}`,
    );
    expect(ingress.metadata.annotations?.["networking.knative.dev/ingress.class"]).toBe(ingressClass);
    const route = await get(`${servingApi}/namespaces/${ns()}/routes/${name}`);
    expect(conditionOf(route, "Ready")?.status).not.toBe("True");
    expect(conditionOf(ingress, "Ready")?.status).not.toBe("True");
  });

  test("Snooze's autoscaler runs beside it and leaves the Service alone: no Model, nothing of Snooze on its objects", async () => {
    expect(suite.autoscaler.process.running()).toBe(true);
    const models = await client().list(paths.custom(group, version, "models", ns()));
    expect(models.items).toEqual([]);
    const d = await deployment();
    expect(Object.keys(d.metadata.annotations ?? {}).filter((k) => k.startsWith("snooze.dev/"))).toEqual([]);
    expect(d.metadata.managedFields?.map((f) => f.manager)).not.toContain("snooze");
    for (const pod of await revisionPods())
      expect(Object.keys(pod.metadata.labels ?? {}).filter((k) => k.startsWith("snooze.dev/tier"))).toEqual(
        [],
      );
  });
});
