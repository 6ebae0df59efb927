import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll, describe, expect, test } from "vitest";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import {
  findKnativeEventing,
  type KnativeEventing,
  knativeEventingMissing,
  startKnativeEventing,
} from "./components/knative-eventing.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { type Component, modelObject, simDeployment, tierOf } from "./components/snooze.ts";
import { repoRoot } from "./harness/assets.ts";
import { parseManifests } from "./harness/manifests.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * A real Knative Eventing (controller, webhook and the PingSource adapter, built from the pinned
 * module) delivers a scheduled prewarm to Snooze's events endpoint with its own sender identity
 * (`authentication-oidc: enabled`): Eventing makes the PingSource's OIDC ServiceAccount, scales its
 * adapter Deployment up, the adapter's pod (the real `mtping` under the stand-in kubelet, in a
 * network namespace of its own) mints a token of that ServiceAccount for the sink's audience and
 * sends the CloudEvent; `snooze activator` checks the token (TokenReview) and the RBAC verb on the
 * Model (SubjectAccessReview) against the real kube-apiserver, then prewarms the model.
 */
const folder = findKnativeEventing();
const model = "qwen";
const source = "prewarm-qwen";
const sourcesApi = "/apis/sources.knative.dev/v1";
let eventing: KnativeEventing | undefined;
let activator: Component | undefined;

const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-eventing",
  objects: async ({ admin, ns, cluster }) => {
    await admin.createDeployment(ns.name, simDeployment(cluster, model, { model, loadTime: "500ms" }));
    await admin.createModel(
      ns.name,
      modelObject(model, { model, sleepAfter: "2s", maxReplicas: 1, port: 8000, prewarmBudget: "10m" }),
    );
  },
  teardown: async () => {
    // Before the namespace goes: the PingSource's finalizer needs Eventing's controller.
    await suite.admin.client
      .delete(`${sourcesApi}/namespaces/${suite.ns.name}/pingsources/${source}`)
      .catch(() => {});
    await waitFor(
      async () =>
        (await suite.admin.client.list(`${sourcesApi}/namespaces/${suite.ns.name}/pingsources`)).items
          .length === 0
          ? true
          : undefined,
      { what: "Eventing to let the PingSource go", timeoutMs: 30_000 },
    ).catch((error: unknown) => console.warn(String(error)));
    await activator?.stop();
    await eventing?.stop();
  },
});

beforeAll(async () => {
  if (!folder) throw new Error(knativeEventingMissing());
  eventing = await startKnativeEventing(suite.cluster, folder, {
    config: { "config-features": { "authentication-oidc": "enabled" } },
  });
  // Where the adapter's pod reaches it: the node's address on the pod network (its default gateway).
  const node = await suite.admin.client.get<{ status: { addresses: { type: string; address: string }[] } }>(
    `/api/v1/nodes/${suite.cluster.info.kubelet.nodeName}`,
  );
  const nodeIP = node.status.addresses.find((a) => a.type === "InternalIP")!.address;
  // With an admin token, as on a cluster: the sender's token is not it.
  activator = await suite.startActivator(
    "activator-events",
    undefined,
    { SNOOZE_ADMIN_TOKEN: "e2e-admin" },
    nodeIP,
  );
}, 240_000);

const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const logs = () =>
  `${eventing?.logs(15)}\nactivator-events:\n${activator?.process.tail(20)}\n${suite.logs(20, 0)}`;
const pods = () => suite.admin.pods(ns(), model);
const ready = (pod: Pod) => pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

const samplesDir = join(repoRoot, "config/samples");
const sample = async (file: string) =>
  parseManifests(await readFile(join(samplesDir, file), "utf8"), file).map((m) => m.object as any);
const pathOf = (object: { apiVersion: string; kind: string }) => {
  const group = object.apiVersion.includes("/") ? `/apis/${object.apiVersion}` : `/api/${object.apiVersion}`;
  return `${group}/namespaces/${ns()}/${object.kind.toLowerCase()}s`;
};

describe("Knative Eventing delivers to Snooze with its own sender identity", () => {
  test("the samples' PingSources, Trigger and RBAC pass Eventing's own validation", async () => {
    for (const file of ["scheduled-prewarm.yaml", "trigger-prewarm.yaml"])
      for (const object of await sample(file)) await client().create(`${pathOf(object)}?dryRun=All`, object);
  });

  test("the scheduled-prewarm sample: 403 naming the rule until its Role is bound, then the model wakes and stays awake for its `for`", async () => {
    // The sample's objects as they are, but for when and where: every 2 s (Eventing's cron takes
    // an optional seconds field), to this activator (no cluster DNS here).
    const [ping, role, binding] = await sample("scheduled-prewarm.yaml");
    expect([ping.kind, role.kind, binding.kind]).toEqual(["PingSource", "Role", "RoleBinding"]);
    ping.spec.schedule = "*/2 * * * * *";
    delete ping.spec.timezone;
    ping.spec.sink.uri = `${activator!.url}/snooze/v1/events`;
    await client().create(pathOf(ping), ping);
    // The identity Eventing gives the source is the one the sample's RoleBinding names.
    const created = await waitFor(
      async () => {
        const s = await client().get<any>(`${pathOf(ping)}/${ping.metadata.name}`);
        return s.status?.auth?.serviceAccountName ? s : undefined;
      },
      { what: "Eventing to give the PingSource its OIDC identity", timeoutMs: 30_000, detail: logs },
    );
    const serviceAccount = created.status.auth.serviceAccountName;
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: serviceAccount }]);

    // Its adapter's pod runs, becomes Ready (its readiness probe waits 20 s) and sends: refused,
    // and the activator's log says why and to whom.
    const refusal = `system:serviceaccount:${ns()}:${serviceAccount} may not prewarm models.snooze.dev ${ns()}/${model}`;
    await waitFor(async () => (activator!.process.tail(200).includes(refusal) ? true : undefined), {
      what: "the adapter's first delivery, refused for want of the Role",
      timeoutMs: 90_000,
      intervalMs: 500,
      detail: logs,
    });
    expect((await pods()).length).toBe(0);

    await client().create(pathOf(role), role);
    await client().create(pathOf(binding), binding);
    // A tick after the binding is seen (the activator keeps a refusal for a few seconds): the prewarm.
    await waitFor(
      async () => {
        const p = (await pods()).filter(ready);
        return p.length === 1 && tierOf(p[0]!) === "ready" ? true : undefined;
      },
      { what: "the prewarm to wake the model", timeoutMs: 60_000, intervalMs: 250, detail: logs },
    );
    // No more ticks: what keeps it awake now is the prewarm's `for`, not new events.
    await client().patch(`${pathOf(ping)}/${ping.metadata.name}`, { spec: { schedule: "0 0 1 1 *" } });
    await new Promise((resolve) => setTimeout(resolve, 6_000)); // 3× sleepAfter
    expect((await pods()).filter(ready).map(tierOf)).toEqual(["ready"]);
  }, 240_000);
});
