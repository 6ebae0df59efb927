import {
  AppsV1Api,
  AuthorizationV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  type V1ResourceAttributes,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { group, version } from "../../lib/kube/api-group.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import { KubeClaimStore } from "../../webhooks/slot-claims.ts";
import { ManualClock } from "../support/manual-clock.ts";
import { identityManifests } from "./components/snooze.ts";
import { applyManifests, waitForCrds } from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import { suiteCluster } from "./harness/suite.ts";

/**
 * Each component's ServiceAccount, with exactly the RBAC of config/, may do what the component needs
 * and nothing broader. Asked of the apiserver as that ServiceAccount (SelfSubjectAccessReview), and
 * confirmed with real calls.
 */
const cluster = suiteCluster();
const system = "snooze-system";
/** The webhooks' admission claims: a namespace of their own, away from the autoscaler's Leases. */
const claims = "snooze-slot-claims";
type Access = V1ResourceAttributes & { what: string };

const r = (verb: string, resource: string, extra: Partial<V1ResourceAttributes> = {}): Access => {
  const [res, sub] = resource.split("/");
  const groupOf: Record<string, string> = {
    models: group,
    slots: group,
    deployments: "apps",
    statefulsets: "apps",
    leases: "coordination.k8s.io",
    validatingwebhookconfigurations: "admissionregistration.k8s.io",
    mutatingwebhookconfigurations: "admissionregistration.k8s.io",
    events: "events.k8s.io",
    tokenreviews: "authentication.k8s.io",
    subjectaccessreviews: "authorization.k8s.io",
    services: extra.group ?? "",
  };
  return {
    verb,
    resource: res,
    subresource: sub,
    group: groupOf[res!] ?? "",
    ...extra,
    what: `${verb} ${resource}${extra.group ? `.${extra.group}` : ""}${extra.namespace ? ` in ${extra.namespace}` : " (all namespaces)"}`,
  };
};

const needs: Record<string, { allowed: Access[]; denied: Access[] }> = {
  "snooze-activator": {
    allowed: [
      r("list", "models"),
      r("watch", "models"),
      r("list", "pods"),
      r("watch", "pods"),
      r("get", "pods", { namespace: "team-a" }),
      r("list", "deployments"),
      r("list", "statefulsets"),
      r("watch", "services", { group: "serving.knative.dev" }),
      // Snooze's Knative ingress class: the KIngresses whose hosts it routes.
      r("watch", "ingresses", { group: "networking.internal.knative.dev" }),
      // Event senders with a token of their own (a Knative Trigger's): who they are, what they may do.
      r("create", "tokenreviews"),
      r("create", "subjectaccessreviews"),
    ],
    denied: [
      r("patch", "pods", { namespace: "team-a" }),
      r("delete", "pods", { namespace: "team-a" }),
      r("create", "pods", { namespace: "team-a" }),
      r("get", "secrets", { namespace: system }),
      r("list", "configmaps"),
      r("update", "models", { namespace: "team-a" }),
      r("patch", "models/status", { namespace: "team-a" }),
      r("patch", "ingresses/status", { namespace: "team-a", group: "networking.internal.knative.dev" }),
      r("update", "deployments/scale", { namespace: "team-a" }),
      r("create", "leases", { namespace: system }),
      r("list", "services"),
    ],
  },
  "snooze-autoscaler": {
    allowed: [
      r("watch", "models"),
      r("list", "slots"),
      r("update", "models/status", { namespace: "team-a" }),
      r("patch", "slots/status", { namespace: "team-a" }),
      r("get", "deployments/scale", { namespace: "team-a" }),
      r("patch", "deployments/scale", { namespace: "team-a" }),
      r("update", "statefulsets/scale", { namespace: "team-a" }),
      r("patch", "pods", { namespace: "team-a" }),
      r("watch", "pods"),
      r("patch", "services", { namespace: "team-a", group: "serving.knative.dev" }),
      r("create", "leases", { namespace: system }),
      r("update", "leases", { namespace: system }),
      // A deleted Model's Lease is deleted by its holder, not left behind.
      r("delete", "leases", { namespace: system }),
      r("create", "events", { namespace: "team-a" }),
      // Models of annotated workloads: created, deleted when the annotations go; never updated.
      r("create", "models", { namespace: "team-a" }),
      r("delete", "models", { namespace: "team-a" }),
      // Its callers (activators, other replicas) are authenticated by TokenReview.
      r("create", "tokenreviews"),
      // The Knative autoscaler class: PodAutoscalers' status, and their ServerlessServices.
      r("watch", "podautoscalers", { group: "autoscaling.internal.knative.dev" }),
      r("update", "podautoscalers/status", {
        namespace: "team-a",
        group: "autoscaling.internal.knative.dev",
      }),
      r("create", "serverlessservices", { namespace: "team-a", group: "networking.internal.knative.dev" }),
      r("update", "serverlessservices", { namespace: "team-a", group: "networking.internal.knative.dev" }),
      // The Knative ingress class: KIngresses' status, once the activators (their endpoints) route them.
      r("watch", "ingresses", { group: "networking.internal.knative.dev" }),
      r("patch", "ingresses/status", { namespace: "team-a", group: "networking.internal.knative.dev" }),
      r("list", "endpointslices", { namespace: system, group: "discovery.k8s.io" }),
      // Knative's autoscaling defaults: config-autoscaler, by name (a list or watch with its field selector).
      r("get", "configmaps", { namespace: "knative-serving", name: "config-autoscaler" }),
      r("list", "configmaps", { namespace: "knative-serving", name: "config-autoscaler" }),
      r("watch", "configmaps", { namespace: "knative-serving", name: "config-autoscaler" }),
    ],
    denied: [
      // A PodAutoscaler's spec is Knative's revision reconciler's; Revisions are not read.
      r("update", "podautoscalers", { namespace: "team-a", group: "autoscaling.internal.knative.dev" }),
      r("delete", "serverlessservices", { namespace: "team-a", group: "networking.internal.knative.dev" }),
      r("get", "revisions", { namespace: "team-a", group: "serving.knative.dev" }),
      // A KIngress's spec is Knative's Route reconciler's; other namespaces' endpoints are not read.
      r("update", "ingresses", { namespace: "team-a", group: "networking.internal.knative.dev" }),
      r("list", "endpointslices", { namespace: "team-a", group: "discovery.k8s.io" }),
      // No other ConfigMap, and not every one by a list.
      r("get", "configmaps", { namespace: "knative-serving", name: "config-network" }),
      r("list", "configmaps", { namespace: "knative-serving" }),
      r("get", "configmaps", { namespace: system }),
      r("update", "models", { namespace: "team-a" }),
      r("patch", "models", { namespace: "team-a" }),
      r("delete", "pods", { namespace: "team-a" }),
      r("create", "pods", { namespace: "team-a" }),
      r("update", "deployments", { namespace: "team-a" }),
      r("create", "deployments", { namespace: "team-a" }),
      r("get", "secrets", { namespace: system }),
      r("create", "leases", { namespace: "kube-system" }),
      r("update", "leases", { namespace: "team-a" }),
      r("list", "nodes"),
      r("create", "serviceaccounts/token", { namespace: system }),
    ],
  },
  "snooze-webhooks": {
    allowed: [
      r("list", "models"),
      r("watch", "models"),
      r("get", "slots", { namespace: "team-a" }),
      // The one-resident-per-slot rule reads members' workloads, their pods and the slot's Lease
      // (the autoscaler's, in snooze-system), and takes the slot's admission claim (a Lease of its
      // own in snooze-slot-claims).
      r("list", "pods"),
      r("list", "deployments"),
      r("get", "statefulsets", { namespace: "team-a" }),
      r("get", "leases", { namespace: system }),
      r("get", "leases", { namespace: claims }),
      r("create", "leases", { namespace: claims }),
      r("update", "leases", { namespace: claims }),
      // A member that stops asking for its slot gives its claim back.
      r("delete", "leases", { namespace: claims }),
      // Claims left behind (their writer gone before it ended them) are listed and deleted.
      r("list", "leases", { namespace: claims }),
      // Its own certificate Secret and the CA bundles of its two webhook configurations, by name.
      r("update", "secrets", { namespace: system, name: "snooze-webhook-certs" }),
      r("update", "validatingwebhookconfigurations", {
        group: "admissionregistration.k8s.io",
        name: "snooze-webhooks",
      }),
      r("update", "mutatingwebhookconfigurations", {
        group: "admissionregistration.k8s.io",
        name: "snooze-webhooks",
      }),
    ],
    denied: [
      r("get", "secrets", { namespace: system }),
      r("create", "secrets", { namespace: system }),
      r("get", "secrets", { namespace: "team-a", name: "snooze-webhook-certs" }),
      r("update", "validatingwebhookconfigurations", {
        group: "admissionregistration.k8s.io",
        name: "other",
      }),
      r("update", "models", { namespace: "team-a" }),
      r("patch", "models/status", { namespace: "team-a" }),
      // The autoscaler's Leases (its leader and slot Leases): read, never written.
      r("create", "leases", { namespace: system }),
      r("update", "leases", { namespace: system, name: "snooze-slot-gpu-0" }),
      r("update", "leases", { namespace: system }),
      r("delete", "leases", { namespace: system }),
      r("list", "leases", { namespace: system }),
      r("patch", "leases", { namespace: system }),
      r("patch", "leases", { namespace: claims }),
      r("get", "leases", { namespace: "team-a" }),
      r("create", "leases", { namespace: "team-a" }),
      r("update", "leases", { namespace: "kube-system" }),
      r("patch", "pods", { namespace: "team-a" }),
      r("update", "deployments", { namespace: "team-a" }),
    ],
  },
};

const identities = new Map<string, KubeConfig>();
let workloads: Awaited<ReturnType<typeof createTestNamespace>>;

beforeAll(async () => {
  // Only the identity part of config/default for real: namespace, CRDs, ServiceAccounts, RBAC.
  const identity = await identityManifests(cluster);
  // No wildcard anywhere: every verb and resource a component gets is named.
  for (const m of identity.filter((i) => i.object.kind === "ClusterRole" || i.object.kind === "Role")) {
    const rules = (m.object as { rules?: { verbs: string[]; resources?: string[]; apiGroups?: string[] }[] })
      .rules;
    expect(JSON.stringify(rules), m.object.metadata?.name).not.toContain('"*"');
  }
  expect(await applyManifests(cluster.admin, identity, { dryRun: false })).toEqual([]);
  await waitForCrds(cluster.admin, ["models.snooze.dev", "slots.snooze.dev"]);
  for (const name of Object.keys(needs)) identities.set(name, await cluster.asServiceAccount(system, name));
  workloads = await createTestNamespace(cluster.admin, "snooze-e2e-rbac");
});

afterAll(async () => {
  await workloads?.remove();
});

async function allowed(kc: KubeConfig, access: Access): Promise<boolean> {
  const { what: _what, ...resourceAttributes } = access;
  const review = await kc.makeApiClient(AuthorizationV1Api).createSelfSubjectAccessReview({
    body: { spec: { resourceAttributes } },
  });
  return review.status?.allowed === true;
}

describe.each(Object.keys(needs))("the %s ServiceAccount", (component) => {
  test("may do what the component needs", async () => {
    const kc = identities.get(component)!;
    const missing: string[] = [];
    for (const access of needs[component]!.allowed)
      if (!(await allowed(kc, access))) missing.push(access.what);
    expect(missing).toEqual([]);
  });

  test("may do nothing broader", async () => {
    const kc = identities.get(component)!;
    const excess: string[] = [];
    for (const access of needs[component]!.denied) if (await allowed(kc, access)) excess.push(access.what);
    expect(excess).toEqual([]);
  });
});

describe("real calls with the components' identities", () => {
  test("the autoscaler scales a Deployment, writes Model status and holds a Lease; it cannot delete a pod", async () => {
    const ns = workloads.name;
    await cluster.admin.makeApiClient(AppsV1Api).createNamespacedDeployment({
      namespace: ns,
      body: {
        metadata: { name: "engine" },
        spec: {
          replicas: 0,
          selector: { matchLabels: { app: "engine" } },
          template: {
            metadata: { labels: { app: "engine" } },
            spec: { containers: [{ name: "e", image: "x" }] },
          },
        },
      },
    });
    await cluster.admin.makeApiClient(CustomObjectsApi).createNamespacedCustomObject({
      group,
      version,
      namespace: ns,
      plural: "models",
      body: {
        apiVersion: `${group}/${version}`,
        kind: "Model",
        metadata: { name: "engine" },
        spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "engine" } },
      },
    });
    const autoscaler = identities.get("snooze-autoscaler")!;

    const apps = autoscaler.makeApiClient(AppsV1Api);
    // A merge patch, as the autoscaler writes scale: no resourceVersion to lose a race with the
    // deployment controller's own writes.
    await apps.patchNamespacedDeploymentScale(
      { name: "engine", namespace: ns, body: { spec: { replicas: 2 } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    const deployment = await cluster.admin
      .makeApiClient(AppsV1Api)
      .readNamespacedDeployment({ name: "engine", namespace: ns });
    expect(deployment.spec?.replicas).toBe(2);

    const custom = autoscaler.makeApiClient(CustomObjectsApi);
    const model = (await custom.getNamespacedCustomObjectStatus({
      group,
      version,
      namespace: ns,
      plural: "models",
      name: "engine",
    })) as Record<string, unknown>;
    await custom.replaceNamespacedCustomObjectStatus({
      group,
      version,
      namespace: ns,
      plural: "models",
      name: "engine",
      body: { ...model, status: { replicas: 0, phase: "Cold", selector: "app=engine" } },
    });
    // Status yes, spec no.
    await expect(
      custom.replaceNamespacedCustomObject({
        group,
        version,
        namespace: ns,
        plural: "models",
        name: "engine",
        body: model,
      }),
    ).rejects.toMatchObject({ code: 403 });

    const lease = await autoscaler.makeApiClient(CoordinationV1Api).createNamespacedLease({
      namespace: system,
      body: {
        metadata: { name: `slot-${ns}` },
        spec: { holderIdentity: "snooze-autoscaler-0", leaseDurationSeconds: 15 },
      },
    });
    expect(lease.spec?.holderIdentity).toBe("snooze-autoscaler-0");
    await cluster.admin
      .makeApiClient(CoordinationV1Api)
      .deleteNamespacedLease({ name: `slot-${ns}`, namespace: system });

    await expect(
      autoscaler.makeApiClient(CoreV1Api).deleteNamespacedPod({ name: "anything", namespace: ns }),
    ).rejects.toMatchObject({ code: 403 });

    // Knative's config-autoscaler, listed as its watch lists it: by the name's field selector.
    const core = autoscaler.makeApiClient(CoreV1Api);
    await core.listNamespacedConfigMap({
      namespace: "knative-serving",
      fieldSelector: "metadata.name=config-autoscaler",
    });
    await expect(core.listNamespacedConfigMap({ namespace: "knative-serving" })).rejects.toMatchObject({
      code: 403,
    });
  });

  test("the activator lists pods in every namespace but cannot change one", async () => {
    const core = identities.get("snooze-activator")!.makeApiClient(CoreV1Api);
    await core.listPodForAllNamespaces({ limit: 1 });
    await expect(
      core.deleteNamespacedPod({ name: "anything", namespace: workloads.name }),
    ).rejects.toMatchObject({ code: 403 });
    await expect(core.listNamespacedSecret({ namespace: system })).rejects.toMatchObject({ code: 403 });
  });

  test("the webhooks read Models and pods but change no pod and read no other Secret", async () => {
    const kc = identities.get("snooze-webhooks")!;
    await kc.makeApiClient(CustomObjectsApi).listClusterCustomObject({ group, version, plural: "models" });
    await kc.makeApiClient(CoreV1Api).listPodForAllNamespaces({ limit: 1 });
    await expect(
      kc.makeApiClient(CoreV1Api).deleteNamespacedPod({ name: "anything", namespace: workloads.name }),
    ).rejects.toMatchObject({ code: 403 });
    await expect(
      kc.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: system }),
    ).rejects.toMatchObject({
      code: 403,
    });
  });

  test("the webhooks take, retake and give back a slot's admission claim in snooze-slot-claims; they write no Lease in snooze-system", async () => {
    const kc = identities.get("snooze-webhooks")!;
    const client = await KubeClient.fromKubeConfig(kc);
    try {
      const store = new KubeClaimStore(client, claims);
      const claim = (name: string) => ({
        member: { kind: "Deployment", name },
        at: Date.now(),
        windowMs: 15_000,
      });
      expect(await store.write(workloads.name, "gpu-rbac", claim("a"), undefined)).toBe(true);
      const first = await store.read(workloads.name, "gpu-rbac");
      expect(first?.claim?.member).toEqual({ kind: "Deployment", name: "a" });
      expect(await store.write(workloads.name, "gpu-rbac", claim("b"), first)).toBe(true);
      // A second writer with the same, now stale, claim loses.
      expect(await store.write(workloads.name, "gpu-rbac", claim("c"), first)).toBe(false);
      expect((await store.read(workloads.name, "gpu-rbac"))?.claim?.member.name).toBe("b");
      const leases = kc.makeApiClient(CoordinationV1Api);
      for (const elsewhere of [system, workloads.name]) {
        await expect(
          new KubeClaimStore(client, elsewhere).write(workloads.name, "gpu-rbac", claim("a"), undefined),
        ).rejects.toMatchObject({ status: 403 });
      }
      // The autoscaler's Lease in snooze-system: readable, not writable.
      const admin = cluster.admin.makeApiClient(CoordinationV1Api);
      const autoscalerLease = await admin.createNamespacedLease({
        namespace: system,
        body: {
          metadata: { name: `snooze-slot-${workloads.name}` },
          spec: { holderIdentity: "snooze-autoscaler-0", leaseDurationSeconds: 15 },
        },
      });
      try {
        const read = await leases.readNamespacedLease({
          namespace: system,
          name: `snooze-slot-${workloads.name}`,
        });
        expect(read.spec?.holderIdentity).toBe("snooze-autoscaler-0");
        await expect(
          leases.replaceNamespacedLease({
            namespace: system,
            name: `snooze-slot-${workloads.name}`,
            body: { ...autoscalerLease, spec: { ...autoscalerLease.spec, holderIdentity: "webhooks" } },
          }),
        ).rejects.toMatchObject({ code: 403 });
      } finally {
        await admin.deleteNamespacedLease({ namespace: system, name: `snooze-slot-${workloads.name}` });
      }
      // Given back, conditionally: not with a stale resourceVersion, then with the current one.
      expect(await store.release(workloads.name, "gpu-rbac", first!)).toBe(false);
      expect(
        await store.release(workloads.name, "gpu-rbac", (await store.read(workloads.name, "gpu-rbac"))!),
      ).toBe(true);
      expect(await store.read(workloads.name, "gpu-rbac")).toBeUndefined();
      // A claim left behind is collected once this replica has seen it for its window.
      const clock = new ManualClock(0);
      const collector = new KubeClaimStore(client, claims, { clock });
      expect(await store.write(workloads.name, "gpu-rbac", claim("d"), undefined)).toBe(true);
      store.close();
      expect(await collector.collect()).toBe(0);
      clock.advance(15_000);
      expect(await collector.collect()).toBeGreaterThanOrEqual(1);
      expect(await store.read(workloads.name, "gpu-rbac")).toBeUndefined();
    } finally {
      await client.close();
    }
  });
});
