import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../../lib/free-port.ts";
import { KubeClient } from "../../../lib/kube/client.ts";
import { type BuiltComponent, findBuilt, notBuilt } from "../harness/assets.ts";
import { routableAddress } from "../harness/host-address.ts";
import { mintServiceAccountKubeconfig, writeKubeconfig } from "../harness/kubeconfig.ts";
import { type LoopbackNetns, loopbackNetns } from "../harness/loopback-netns.ts";
import { manifestsUnder } from "../harness/manifests.ts";
import { type ManagedProcess, startProcess } from "../harness/process.ts";
import type { SuiteCluster } from "../harness/suite.ts";
import { waitFor } from "../harness/wait.ts";
import {
  applyWebhookConfigurations,
  asRunHere,
  coreKinds,
  installManifests,
  knativeEnv,
  removeWebhookConfigurations,
  startKnativeWebhook,
  waitForAggregatedRole,
  waitForLeaderLease,
} from "./knative-system.ts";

/**
 * Knative Serving in the e2e cluster: its controller, webhook and autoscaler (the KPA), built by
 * hack/build-knative.sh from the pinned `knative.dev/serving` module, run as processes against the
 * real apiserver as Knative's `controller` ServiceAccount, with the env Knative's Deployments give
 * them; its own manifests from the same module's config/core (namespace, CRDs, config maps, RBAC,
 * the webhook configurations and their Service; not the Deployments, HPAs and PDBs). Its revision
 * pods run under the stand-in kubelet: the user container as `snooze sim`, the queue-proxy as the
 * real binary of the same build (global-setup maps its image with `--run-image`).
 *
 * Where each process runs, and why:
 * - The webhook on this machine: the apiserver reaches it through the `webhook` Service's
 *   EndpointSlice at this machine's routable address (--enable-aggregator-routing), TLS from
 *   Knative's own certificate reconciler (the `webhook-certs` Secret, the caBundle it writes into
 *   the webhook configurations).
 * - The autoscaler on this machine, so it reaches the revision pods' queue-proxy metrics on their
 *   pod IPs, as in a cluster; its POD_IP is the routable address (Endpoints refuse loopback).
 * - The controller in a network namespace of its own (harness/loopback-netns.ts): it serves
 *   health probes on the fixed port 8080, which the autoscaler's stats server also binds.
 *
 * No networking layer of Knative's runs: a Route's Ingress (class `config-network`'s
 * `ingress-class`) is created but nothing makes it Ready unless a test runs an implementation of
 * that class. Image tags are not resolved to digests (`registries-skipping-tag-resolving`), so no
 * registry is asked. Needs root (network namespaces, and the stand-in kubelet's netns pod network,
 * where each pod has its own 127.0.0.1 as queue-proxy expects).
 */
export const knativeNamespace = "knative-serving";
/** The queue-proxy image config-deployment names (the ko reference of config/core, as built). */
export const queueSidecarImage = "ko://knative.dev/serving/cmd/queue";
/** The KPA, Knative's own autoscaler class (the PodAutoscaler's `autoscaling.knative.dev/class`). */
export const kpaClass = "kpa.autoscaling.knative.dev";
/** The ingress class set in config-network unless a test asks for another. */
export const defaultIngressClass = "e2e-none.ingress.networking.knative.dev";
/** Registries whose tags Knative does not resolve to digests: Knative's defaults and Docker Hub. */
export const registriesSkippingTagResolving = "kind.local,ko.local,dev.local,index.docker.io";

const serviceAccount = "controller";
const webhookService = "webhook";

const knativeBuild: BuiltComponent = {
  name: "Knative Serving",
  script: "build-knative.sh",
  cacheFolder: "knative",
  envVar: "SNOOZE_KNATIVE_DIR",
  marker: "controller",
};

/** The folder hack/build-knative.sh built (binaries and config/core), or undefined when it is not built. */
export const findKnative = (): string | undefined => findBuilt(knativeBuild);

export const knativeMissing = (): string => notBuilt(knativeBuild);

/** The sidecar images the stand-in kubelet runs as binaries of `folder` (its `--run-image` flags). */
export const knativeImages = (folder: string): Record<string, string> => ({
  [queueSidecarImage]: join(folder, "queue"),
});

export interface KnativeOptions {
  /** config-network's `ingress-class` (default {@link defaultIngressClass}). */
  ingressClass?: string;
  /** Extra keys per config map of Knative's (`config-autoscaler`, `config-features`, ...), applied before start. */
  config?: Record<string, Record<string, string>>;
}

export interface Knative {
  folder: string;
  namespace: string;
  ingressClass: string;
  controller: ManagedProcess;
  webhook: ManagedProcess;
  autoscaler: ManagedProcess;
  /**
   * Merges `data` into one of Knative's config maps (through Knative's config validation webhook);
   * a key set to null is removed (a merge patch).
   */
  configure(configMap: string, data: Record<string, string | null>): Promise<void>;
  /** The last lines of each process's log, for failure messages. */
  logs(lines?: number): string;
  /**
   * Removes the webhook configurations and stops the three processes; the CRDs and config maps
   * stay (a later start, or a dry run against Knative's CRDs, finds them).
   */
  stop(): Promise<void>;
}

const installedKinds = new Set([...coreKinds, "Image"]);
// The webhook's Service (reached through the EndpointSlice below), and the activator's, which no
// process backs here (its Endpoints, below, are empty): the serverless services' proxy mode points at them.
const installedServices = new Set([webhookService, "activator-service"]);

/** The config Knative runs with here, on top of config/core's. */
function configOverrides(options: KnativeOptions): Record<string, Record<string, string>> {
  const base: Record<string, Record<string, string>> = {
    "config-deployment": {
      "queue-sidecar-image": queueSidecarImage,
      "registries-skipping-tag-resolving": registriesSkippingTagResolving,
    },
    "config-network": { "ingress-class": options.ingressClass ?? defaultIngressClass },
    // Revision pods name the stand-in kubelet's scheduler, so a real cluster's scheduler leaves them alone.
    "config-features": { "kubernetes.podspec-schedulername": "enabled" },
  };
  for (const [name, data] of Object.entries(options.config ?? {})) base[name] = { ...base[name], ...data };
  return base;
}

/** Installs Knative Serving's manifests, starts webhook, controller and autoscaler, and waits until they work. */
export async function startKnative(
  cluster: SuiteCluster,
  folder: string,
  options: KnativeOptions = {},
): Promise<Knative> {
  const dir = join(cluster.info.dir, "knative");
  await mkdir(dir, { recursive: true });
  const admin = await KubeClient.fromKubeConfig(cluster.admin);
  const hostIP = routableAddress();
  const overrides = configOverrides(options);

  const picked = (await manifestsUnder(join(folder, "config/core")))
    .filter((m) => installedKinds.has(m.object.kind ?? ""))
    .filter((m) => m.object.kind !== "Service" || installedServices.has(m.object.metadata?.name ?? ""))
    .map((m) => asRunHere(m, overrides));
  // Config maps before the webhook configurations: until the webhook serves, its config
  // validation (failurePolicy Fail) would refuse them.
  await installManifests(cluster, "Knative Serving", picked);
  // The controller ServiceAccount's ClusterRole aggregates the others (kube-controller-manager fills it).
  await waitForAggregatedRole(admin, "knative-serving-admin");
  const kubeconfig = await writeKubeconfig(
    join(dir, "controller.kubeconfig"),
    await mintServiceAccountKubeconfig(cluster.admin, knativeNamespace, serviceAccount, 4 * 3_600),
  );
  const env = knativeEnv(knativeNamespace, "knative.dev/internal/serving");
  const args = [`--kubeconfig=${kubeconfig}`];

  // Knative's activator Service has no selector here and no process behind it; its SKS reconciler
  // reads the Endpoints `activator-service` before anything else of a revision and errors on every
  // sync without them. A cluster whose activator has no ready pod has them empty: so do these.
  const activatorEndpoints = `/api/v1/namespaces/${knativeNamespace}/endpoints/activator-service`;
  await admin.delete(activatorEndpoints).catch(() => {});
  await admin.create(`/api/v1/namespaces/${knativeNamespace}/endpoints`, {
    apiVersion: "v1",
    kind: "Endpoints",
    metadata: { name: "activator-service", namespace: knativeNamespace },
    subsets: [],
  });
  const started: { stop(graceMs?: number): Promise<void> }[] = [];
  let netns: LoopbackNetns | undefined;
  const stopAll = async () => {
    await removeWebhookConfigurations(admin, picked);
    for (const p of started.reverse()) await p.stop(5_000);
    await netns?.close();
    await admin.close();
  };
  try {
    // The webhook, then the webhook configurations it reconciles.
    const webhook = await startKnativeWebhook(admin, {
      name: "knative-webhook",
      binary: join(folder, "webhook"),
      args,
      logPath: join(dir, "webhook.log"),
      env: env("webhook", { WEBHOOK_NAME: "webhook" }),
      namespace: knativeNamespace,
      service: webhookService,
      hostIP,
      // Served through the apiserver: a dry-run create passes Knative's defaulting and validation.
      admits: () =>
        admin.create(
          `/apis/serving.knative.dev/v1/namespaces/${knativeNamespace}/services?dryRun=All`,
          knativeService("webhook-probe", { image: "dev.local/probe", args: [] }),
        ),
    });
    started.push(webhook);
    await applyWebhookConfigurations(cluster, "Knative Serving", picked);

    const startedAt = Date.now();
    netns = await loopbackNetns(dir, "knative-controller", cluster.info.server);
    const controllerBinary = join(folder, "controller");
    const wrapped = netns.wrap([controllerBinary, ...args]);
    const controller = startProcess("knative-controller", wrapped[0]!, wrapped.slice(1), {
      logPath: join(dir, "controller.log"),
      env: env("controller"),
    });
    started.push(controller);
    const autoscaler = startProcess("knative-autoscaler", join(folder, "autoscaler"), args, {
      logPath: join(dir, "autoscaler.log"),
      env: env("autoscaler", { POD_IP: hostIP, PROFILING_PORT: String(await freePort()) }),
    });
    started.push(autoscaler);
    // Each works once it leads its reconcilers: a Lease of its own taken after it started (Knative's
    // leader election; the autoscaler's one bucket lease covers all of its reconcilers).
    await waitForLeaderLease(admin, knativeNamespace, "controller.", controller, startedAt);
    await waitForLeaderLease(admin, knativeNamespace, "autoscaler-bucket-", autoscaler, startedAt);
    const logs = (lines = 30) =>
      [webhook, controller, autoscaler].map((p) => `${p.name}:\n${p.tail(lines)}`).join("\n");
    return {
      folder,
      namespace: knativeNamespace,
      ingressClass: overrides["config-network"]!["ingress-class"]!,
      controller,
      webhook,
      autoscaler,
      async configure(configMap, data) {
        await admin.patch(`/api/v1/namespaces/${knativeNamespace}/configmaps/${configMap}`, { data });
      },
      logs,
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

export interface KnativeServiceOptions {
  /** The user container's image; its tag is never resolved (see registriesSkippingTagResolving). */
  image?: string;
  /** The user container's args: they go to `snooze sim` (vLLM's flags). */
  args?: string[];
  /** Revision template annotations (`autoscaling.knative.dev/*`, `snooze.dev/*`). */
  annotations?: Record<string, string>;
  /** Service annotations. */
  serviceAnnotations?: Record<string, string>;
  /** Revision template labels, on top of the stand-in kubelet's selector label. */
  labels?: Record<string, string>;
  /** The stand-in kubelet's selector and scheduler name; without it, for a dry run, none. */
  kubelet?: SuiteCluster["info"]["kubelet"];
}

/** The args a revision's `snooze sim` gets by default: a small model that loads in 300 ms. */
export const simArgs = (model: string) => [
  "Qwen/Qwen3-0.6B",
  "--served-model-name",
  model,
  "--enable-sleep-mode",
  "--load-time",
  "300ms",
  "--ttft",
  "10ms",
  "--itl",
  "2ms",
];

/**
 * A `serving.knative.dev/v1` Service whose revision pods the stand-in kubelet runs (its selector
 * label and scheduler name on the revision template). The user container listens on Knative's
 * default port 8080 (Knative adds the containerPort and $PORT; the kubelet passes it as --port).
 */
export function knativeService(name: string, options: KnativeServiceOptions = {}) {
  const kubelet = options.kubelet;
  return {
    apiVersion: "serving.knative.dev/v1",
    kind: "Service",
    metadata: { name, annotations: options.serviceAnnotations ?? {} },
    spec: {
      template: {
        metadata: {
          labels: {
            ...(kubelet ? { [kubelet.selector.key]: kubelet.selector.value } : {}),
            ...options.labels,
          },
          annotations: options.annotations ?? {},
        },
        spec: {
          ...(kubelet ? { schedulerName: kubelet.schedulerName } : {}),
          containers: [
            {
              image: options.image ?? "vllm/vllm-openai:v0.11.0",
              args: options.args ?? simArgs(name),
              env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
            },
          ],
        },
      },
    },
  };
}

export const servingApi = "/apis/serving.knative.dev/v1";
export const autoscalingApi = "/apis/autoscaling.internal.knative.dev/v1alpha1";
export const networkingApi = "/apis/networking.internal.knative.dev/v1alpha1";

interface Condition {
  type: string;
  status: string;
  reason?: string;
  message?: string;
}
export type KnativeObject = {
  metadata: { name: string; annotations?: Record<string, string>; labels?: Record<string, string> };
  status?: { conditions?: Condition[]; [key: string]: unknown };
  [key: string]: unknown;
};

/** The condition `type` of a Knative object's status. */
export const conditionOf = (object: KnativeObject | undefined, type: string) =>
  object?.status?.conditions?.find((c) => c.type === type);

/** Waits until the object at `path` has condition `type` True; the last conditions are in the error. */
export async function waitForCondition(
  client: KubeClient,
  path: string,
  type: string,
  options: { timeoutMs?: number; detail?: () => string } = {},
): Promise<KnativeObject> {
  let last: KnativeObject | undefined;
  return waitFor(
    async () => {
      last = await client.get<KnativeObject>(path);
      return conditionOf(last, type)?.status === "True" ? last : undefined;
    },
    {
      what: `${path} ${type}`,
      timeoutMs: options.timeoutMs ?? 60_000,
      intervalMs: 200,
      detail: () =>
        `conditions: ${JSON.stringify(last?.status?.conditions ?? [])}\n${options.detail?.() ?? ""}`,
    },
  );
}

/** Waits until the Knative Service `namespace/name` is Ready (with a URL); resolves to it. */
export const waitForKsvcReady = (
  client: KubeClient,
  namespace: string,
  name: string,
  options: { timeoutMs?: number; detail?: () => string } = {},
) => waitForCondition(client, `${servingApi}/namespaces/${namespace}/services/${name}`, "Ready", options);

/**
 * Deletes these Knative Services of `namespace` and waits (30 s at most, then a warning) until
 * Knative has deleted every revision there. Run it before the components and the namespace go:
 * Knative's finalizers need its controller.
 */
export async function deleteKnativeServices(
  client: KubeClient,
  namespace: string,
  names: readonly string[],
): Promise<void> {
  for (const name of names)
    await client.delete(`${servingApi}/namespaces/${namespace}/services/${name}`).catch(() => {});
  await waitFor(
    async () =>
      (await client.list(`${servingApi}/namespaces/${namespace}/revisions`)).items.length === 0
        ? true
        : undefined,
    { what: "Knative to delete the Services' revisions", timeoutMs: 30_000 },
  ).catch((error: unknown) => console.warn(String(error)));
}
