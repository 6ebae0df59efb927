import { readFile } from "node:fs/promises";
import { join } from "node:path";
import {
  AdmissionregistrationV1Api,
  CoreV1Api,
  type KubeConfig,
  loadAllYaml,
  type V1MutatingWebhookConfiguration,
  type V1ValidatingWebhookConfiguration,
} from "@kubernetes/client-node";
import { Agent, fetch } from "undici";
import { repoRoot } from "./harness/assets.ts";
import { writeKubeconfig } from "./harness/kubeconfig.ts";
import { applyManifests, identityKinds, kustomize, waitForCrds } from "./harness/manifests.ts";
import { type ManagedProcess, startProcess } from "./harness/process.ts";
import type { SuiteCluster } from "./harness/suite.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * The webhooks of config/ on the test control plane. The apiserver runs on this machine, so the
 * webhook configurations point at a `url` on loopback instead of the Service; everything else is
 * config/ as shipped: names, rules, selectors, the webhooks' ServiceAccount, its RBAC and its empty
 * certificate Secret. Every webhook is further limited to the test's namespace, so other test
 * files never meet it.
 */
export const system = "snooze-system";
/** Where the webhooks keep the slots' admission claims (`--claim-namespace`'s default). */
export const claimNamespace = "snooze-slot-claims";
export const configurationName = "snooze-webhooks";
export const certSecret = "snooze-webhook-certs";

const kinds = new Set<string>([...identityKinds, "Secret"]);

/**
 * Namespace, CRDs, ServiceAccounts, RBAC and the certificate Secret of config/default, for real;
 * with a stand-in Knative Service CRD unless `realKnative` (Knative Serving's own CRDs are installed).
 */
export async function installSnoozeIdentity(
  cluster: SuiteCluster,
  { realKnative = false }: { realKnative?: boolean } = {},
): Promise<void> {
  const rendered = await kustomize(cluster.info.kubectl, join(repoRoot, "config/default"));
  const knative = realKnative
    ? []
    : loadAllYaml(await readFile(join(repoRoot, "test/e2e/fixtures/knative-service-crd.yaml"), "utf8"));
  const objects = [
    ...rendered.filter((m) => kinds.has(m.object.kind ?? "")),
    ...knative.map((object) => ({ source: "knative fixture", object })),
  ];
  const failures = await applyManifests(cluster.admin, objects, { dryRun: false });
  if (failures.length > 0) throw new Error(failures.join("\n"));
  await waitForCrds(cluster.admin, ["models.snooze.dev", "slots.snooze.dev", "services.serving.knative.dev"]);
}

/** Empties the certificate Secret, as on a fresh install. */
export async function resetCertificates(kc: KubeConfig): Promise<void> {
  const core = kc.makeApiClient(CoreV1Api);
  const secret = await core.readNamespacedSecret({ namespace: system, name: certSecret });
  await core.replaceNamespacedSecret({ namespace: system, name: certSecret, body: { ...secret, data: {} } });
}

/**
 * config/webhooks/webhook-configurations.yaml with `url: https://127.0.0.1:<port><path>` and every
 * webhook restricted to `namespaces`. Replaces whatever configuration of that name exists.
 */
export async function registerWebhooks(
  kc: KubeConfig,
  port: number,
  namespaces: string[],
): Promise<() => Promise<void>> {
  const text = await readFile(join(repoRoot, "config/webhooks/webhook-configurations.yaml"), "utf8");
  const [validating, mutating] = loadAllYaml(text) as [
    V1ValidatingWebhookConfiguration,
    V1MutatingWebhookConfiguration,
  ];
  for (const configuration of [validating, mutating]) {
    for (const webhook of configuration.webhooks ?? []) {
      const path = webhook.clientConfig.service?.path ?? "/";
      webhook.clientConfig = { url: `https://127.0.0.1:${port}${path}` };
      webhook.namespaceSelector = {
        ...webhook.namespaceSelector,
        matchExpressions: [{ key: "kubernetes.io/metadata.name", operator: "In", values: namespaces }],
      };
    }
  }
  const api = kc.makeApiClient(AdmissionregistrationV1Api);
  const remove = async () => {
    await api.deleteValidatingWebhookConfiguration({ name: configurationName }).catch(() => {});
    await api.deleteMutatingWebhookConfiguration({ name: configurationName }).catch(() => {});
  };
  await remove();
  await api.createValidatingWebhookConfiguration({ body: validating });
  await api.createMutatingWebhookConfiguration({ body: mutating });
  return remove;
}

/** A kubeconfig file for the webhooks' own ServiceAccount (a TokenRequest token). */
export async function webhooksKubeconfig(cluster: SuiteCluster, name: string): Promise<string> {
  const kc = await cluster.asServiceAccount(system, "snooze-webhooks");
  return writeKubeconfig(join(cluster.info.dir, name), kc);
}

export interface WebhooksProcessOptions {
  kubeconfigPath: string;
  port: number;
  logPath: string;
  args?: string[];
}

/** `snooze webhooks` as its own process, listening on 127.0.0.1:<port> with SO_REUSEPORT. */
export function startWebhooksProcess(options: WebhooksProcessOptions): ManagedProcess {
  return startProcess(
    "snooze-webhooks",
    process.execPath,
    [
      join(repoRoot, "bin/snooze.js"),
      "webhooks",
      "--kubeconfig",
      options.kubeconfigPath,
      "--host",
      "127.0.0.1",
      "--port",
      String(options.port),
      "--reuse-port",
      "--namespace",
      system,
      "--cert-hosts",
      "127.0.0.1",
      // The replicas share the port (SO_REUSEPORT): the kernel stops handing one connections as its
      // listener closes, with no Service endpoints to wait for.
      "--shutdown-delay",
      "0s",
      ...(options.args ?? []),
    ],
    { logPath: options.logPath, env: { ...process.env, SNOOZE_LOG_LEVEL: "info" } },
  );
}

/** Until the process logs that it is ready (caches synced, its certificate loaded). */
export async function waitForReadyLog(process: ManagedProcess, timeoutMs = 30_000): Promise<void> {
  await waitFor(async () => (/"msg":"ready"/.test(process.tail(400)) ? true : undefined), {
    what: "snooze webhooks ready",
    timeoutMs,
    intervalMs: 100,
    abort: process.exited,
    detail: () => process.tail(),
  });
}

/** GET /readyz on the port (whichever process the kernel picks) with the CA from the Secret. */
export async function readyz(port: number, caPem: string): Promise<number> {
  const dispatcher = new Agent({ connect: { ca: caPem } });
  try {
    const response = await fetch(`https://127.0.0.1:${port}/readyz`, {
      dispatcher,
      signal: AbortSignal.timeout(2_000),
    });
    await response.text();
    return response.status;
  } finally {
    await dispatcher.close();
  }
}
