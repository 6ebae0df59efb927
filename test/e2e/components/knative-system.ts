import type { KubernetesObject } from "@kubernetes/client-node";
import { freePort } from "../../../lib/free-port.ts";
import type { KubeClient } from "../../../lib/kube/client.ts";
import { pointServiceAtHost } from "../harness/host-address.ts";
import { applyManifests, identityKinds, type Manifest, waitForCrds } from "../harness/manifests.ts";
import { type ManagedProcess, startProcess } from "../harness/process.ts";
import type { SuiteCluster } from "../harness/suite.ts";
import { waitFor } from "../harness/wait.ts";

/**
 * What Knative Serving and Knative Eventing share in the e2e cluster: both install their own
 * config/core the same way, run a webhook the apiserver reaches through its Service, and lead their
 * reconcilers through Leases. Each component file (knative.ts, knative-eventing.ts) says which of
 * its manifests and processes it runs; the way of running them is here, once.
 */
export const webhookKinds = new Set(["ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"]);

/** The kinds of config/core both install (not its Deployments, HPAs and PDBs: the harness runs the processes). */
export const coreKinds = [...identityKinds, "ConfigMap", "Secret", "Service", ...webhookKinds];

/**
 * The env Knative's Deployments give a component of `namespace` (its pod name and namespace from
 * the downward API, its config map names), with `extra` on top.
 */
export const knativeEnv =
  (namespace: string, metricsDomain: string) =>
  (component: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv => ({
    ...process.env,
    POD_NAME: `${component}-e2e`,
    SYSTEM_NAMESPACE: namespace,
    CONFIG_LOGGING_NAME: "config-logging",
    CONFIG_OBSERVABILITY_NAME: "config-observability",
    METRICS_DOMAIN: metricsDomain,
    ...extra,
  });

/**
 * config/core's object as the harness runs it: a config map with `config`'s values on top of its
 * own; a Service without its selector (no pod backs it: an EndpointSlice points at the process).
 */
export function asRunHere(m: Manifest, config: Record<string, Record<string, string>>): Manifest {
  const name = m.object.metadata?.name ?? "";
  if (m.object.kind === "ConfigMap" && config[name]) {
    const object = m.object as KubernetesObject & { data?: Record<string, string> };
    return { ...m, object: { ...object, data: { ...object.data, ...config[name] } } as KubernetesObject };
  }
  if (m.object.kind === "Service") {
    const spec = { ...(m.object as { spec: Record<string, unknown> }).spec };
    delete spec.selector;
    return { ...m, object: { ...m.object, spec } as KubernetesObject };
  }
  return m;
}

/**
 * Applies `manifests` (webhook configurations left out: see {@link applyWebhookConfigurations}):
 * CRDs first, as custom resources may be among the rest, then everything else.
 */
export async function installManifests(cluster: SuiteCluster, what: string, manifests: Manifest[]) {
  const crds = manifests.filter((m) => m.object.kind === "CustomResourceDefinition");
  const crdFailures = await applyManifests(cluster.admin, crds, { dryRun: false });
  if (crdFailures.length > 0) throw new Error(`installing ${what}'s CRDs failed:\n${crdFailures.join("\n")}`);
  await waitForCrds(
    cluster.admin,
    crds.map((m) => m.object.metadata?.name ?? ""),
  );
  const failures = await applyManifests(
    cluster.admin,
    manifests.filter(
      (m) => m.object.kind !== "CustomResourceDefinition" && !webhookKinds.has(m.object.kind ?? ""),
    ),
    { dryRun: false },
  );
  if (failures.length > 0) throw new Error(`installing ${what} failed:\n${failures.join("\n")}`);
}

/** Waits until kube-controller-manager has filled the aggregated ClusterRole `name` with rules. */
export async function waitForAggregatedRole(admin: KubeClient, name: string): Promise<void> {
  await waitFor(
    async () => {
      const role = await admin.get<{ rules?: unknown[] }>(
        `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}`,
      );
      return (role.rules ?? []).length > 0 ? true : undefined;
    },
    { what: `the aggregated ClusterRole ${name} to get its rules`, timeoutMs: 30_000 },
  );
}

/**
 * Starts a Knative webhook on this machine, where the apiserver reaches it through its Service's
 * EndpointSlice at `hostIP` (--enable-aggregator-routing), TLS from Knative's own certificate
 * reconciler; resolves once `admits` passes through the apiserver.
 */
export async function startKnativeWebhook(
  admin: KubeClient,
  options: {
    name: string;
    binary: string;
    args: string[];
    logPath: string;
    env: NodeJS.ProcessEnv;
    namespace: string;
    service: string;
    hostIP: string;
    admits: () => Promise<unknown>;
  },
): Promise<ManagedProcess> {
  const port = await freePort(options.hostIP);
  await pointServiceAtHost(
    admin,
    { namespace: options.namespace, service: options.service, portName: "https-webhook" },
    options.hostIP,
    port,
  );
  const webhook = startProcess(options.name, options.binary, options.args, {
    logPath: options.logPath,
    env: { ...options.env, WEBHOOK_PORT: String(port), PROFILING_PORT: String(await freePort()) },
  });
  try {
    await waitFor(
      async () => {
        await options.admits();
        return true;
      },
      {
        what: `${options.name} to admit an object (through the apiserver)`,
        timeoutMs: 60_000,
        intervalMs: 250,
        abort: webhook.exited,
        detail: () => webhook.tail(),
      },
    );
  } catch (error) {
    await webhook.stop(5_000);
    throw error;
  }
  return webhook;
}

export async function applyWebhookConfigurations(cluster: SuiteCluster, what: string, manifests: Manifest[]) {
  const failures = await applyManifests(
    cluster.admin,
    manifests.filter((m) => webhookKinds.has(m.object.kind ?? "")),
    { dryRun: false },
  );
  if (failures.length > 0)
    throw new Error(`installing ${what}'s webhook configurations failed:\n${failures.join("\n")}`);
}

/**
 * Deletes the webhook configurations among `manifests`: first when a component stops, so no later
 * file's object waits on a webhook that is gone (failurePolicy Fail); the next start applies them again.
 */
export async function removeWebhookConfigurations(admin: KubeClient, manifests: Manifest[]) {
  for (const m of manifests) {
    if (!webhookKinds.has(m.object.kind ?? "")) continue;
    const plural = m.object.kind === "MutatingWebhookConfiguration" ? "mutating" : "validating";
    await admin
      .delete(
        `/apis/admissionregistration.k8s.io/v1/${plural}webhookconfigurations/${m.object.metadata?.name}`,
      )
      .catch(() => {});
  }
}

/**
 * Waits until `process` leads its reconcilers: a Lease of `namespace` whose name starts with
 * `prefix`, taken since `since` (Knative's leader election).
 */
export async function waitForLeaderLease(
  admin: KubeClient,
  namespace: string,
  prefix: string,
  process: ManagedProcess,
  since: number,
): Promise<void> {
  await waitFor(
    async () => {
      const leases = await admin.list<{ metadata: { name: string }; spec?: { acquireTime?: string } }>(
        `/apis/coordination.k8s.io/v1/namespaces/${namespace}/leases`,
      );
      return leases.items.some(
        (l) =>
          l.metadata.name.startsWith(prefix) &&
          l.spec?.acquireTime !== undefined &&
          Date.parse(l.spec.acquireTime) >= since - 1_000,
      )
        ? true
        : undefined;
    },
    {
      what: `${process.name} to take its leader Lease (${prefix}*)`,
      timeoutMs: 60_000,
      intervalMs: 250,
      abort: process.exited,
      detail: () => process.tail(),
    },
  );
}
