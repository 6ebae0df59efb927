import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { KubernetesObject } from "@kubernetes/client-node";
import { KubeClient } from "../../../lib/kube/client.ts";
import { type BuiltComponent, findBuilt, notBuilt } from "../harness/assets.ts";
import { routableAddress } from "../harness/host-address.ts";
import { mintServiceAccountKubeconfig, writeKubeconfig } from "../harness/kubeconfig.ts";
import { type LoopbackNetns, loopbackNetns } from "../harness/loopback-netns.ts";
import { type Manifest, manifestsUnder } from "../harness/manifests.ts";
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
  waitForLeaderLease,
} from "./knative-system.ts";

/**
 * Knative Eventing in the e2e cluster, enough for its sources to deliver to Snooze: the controller
 * and webhook built by hack/build-knative-eventing.sh from the pinned `knative.dev/eventing`
 * module, run as processes against the real apiserver as Eventing's own ServiceAccounts, and the
 * PingSource adapter (`pingsource-mt-adapter`) as Knative runs it: a Deployment of
 * config/core that Eventing's controller scales up for the first PingSource, whose pod the stand-in
 * kubelet runs as the real `mtping` binary (global-setup maps its image), with the pod's
 * ServiceAccount token, in a network namespace of its own. Manifests from the same module's
 * config/core (namespace, CRDs, RBAC, config maps, the webhook configurations and their Service;
 * of the Deployments only the adapter's).
 *
 * - The webhook on this machine, reached by the apiserver through the `eventing-webhook` Service's
 *   EndpointSlice (as Serving's, knative-system.ts).
 * - The controller in a network namespace of its own (its health probes bind :8080).
 * - With `broker: true`, a Broker's data plane too, as Knative runs it: the MT channel-based
 *   broker (config/brokers/mt-channel-broker: its controller, ingress and filter) over the
 *   in-memory channel (config/channels/in-memory-channel: its controller, which is also the
 *   channel's webhook, and its dispatcher), each a Deployment whose pod the stand-in kubelet runs as
 *   the built binary, in a network namespace of its own, behind its Service with its selector. They
 *   reach each other by Service name (`broker-ingress.knative-eventing.svc.cluster.local`, the
 *   channel's ExternalName Service) through the kubelet's Service router (HTTP_PROXY), as they
 *   would through cluster DNS and kube-proxy. Without it, a source's sink is given as a URI.
 *
 * Needs root (network namespaces).
 */
export const eventingNamespace = "knative-eventing";
/** The PingSource adapter's image in config/core (its ko reference, as built). */
export const pingAdapterImage = "ko://knative.dev/eventing/cmd/mtping";
const adapterDeployment = "pingsource-mt-adapter";
const webhookService = "eventing-webhook";

const eventingBuild: BuiltComponent = {
  name: "Knative Eventing",
  script: "build-knative-eventing.sh",
  cacheFolder: "knative-eventing",
  envVar: "SNOOZE_KNATIVE_EVENTING_DIR",
  marker: "controller",
};

/** The folder hack/build-knative-eventing.sh built, or undefined when it is not built. */
export const findKnativeEventing = (): string | undefined => findBuilt(eventingBuild);

export const knativeEventingMissing = (): string => notBuilt(eventingBuild);

/** The images of the Broker's data plane (config/brokers/mt-channel-broker, config/channels/in-memory-channel), and the binary each is. */
const brokerImages: Record<string, string> = {
  "ko://knative.dev/eventing/cmd/mtchannel_broker": "mtchannel_broker",
  "ko://knative.dev/eventing/cmd/broker/ingress": "broker-ingress",
  "ko://knative.dev/eventing/cmd/broker/filter": "broker-filter",
  "ko://knative.dev/eventing/cmd/in_memory/channel_controller": "imc-controller",
  "ko://knative.dev/eventing/cmd/in_memory/channel_dispatcher": "imc-dispatcher",
};

/** The images the stand-in kubelet runs as binaries of `folder` (its `--run-image` flags). */
export const knativeEventingImages = (folder: string): Record<string, string> => ({
  [pingAdapterImage]: join(folder, "mtping"),
  ...Object.fromEntries(Object.entries(brokerImages).map(([image, binary]) => [image, join(folder, binary)])),
});

export interface KnativeEventing {
  folder: string;
  namespace: string;
  controller: ManagedProcess;
  webhook: ManagedProcess;
  /** The last lines of each process's log and of the adapter pod's, for failure messages. */
  logs(lines?: number): string;
  /** Removes the webhook configurations and stops the processes; CRDs and config maps stay. */
  stop(): Promise<void>;
}

const installedKinds = new Set([...coreKinds, "Deployment"]);

/** A Broker's data plane: the MT channel-based broker over the in-memory channel (their HPAs left out). */
const brokerFolders = ["config/channels/in-memory-channel", "config/brokers/mt-channel-broker"];

/** Installs Eventing's manifests, starts its webhook and controller, and waits until they work. */
export async function startKnativeEventing(
  cluster: SuiteCluster,
  folder: string,
  options: {
    config?: Record<string, Record<string, string>>;
    /** Also run a Broker's data plane (the MT channel-based broker and the in-memory channel). */
    broker?: boolean;
  } = {},
): Promise<KnativeEventing> {
  const dir = join(cluster.info.dir, "knative-eventing");
  await mkdir(dir, { recursive: true });
  const admin = await KubeClient.fromKubeConfig(cluster.admin);
  const hostIP = routableAddress();

  const config = options.config ?? {};
  const all = (await manifestsUnder(join(folder, "config/core"))).filter((m) => kept(m));
  const dataPlane = options.broker
    ? (await Promise.all(brokerFolders.map((f) => manifestsUnder(join(folder, f)))))
        .flat()
        .filter((m) => installedKinds.has(m.object.kind ?? ""))
        // Every one of their Services is backed by their pods: selectors kept.
        .map((m) => (m.object.kind === "Deployment" ? onStandInKubelet(m, cluster) : configured(m, config)))
    : [];
  const picked = [...all.map((m) => adjust(m, cluster, config)), ...dataPlane];
  await installManifests(cluster, "Knative Eventing", picked);

  const kubeconfigOf = async (serviceAccount: string) =>
    writeKubeconfig(
      join(dir, `${serviceAccount}.kubeconfig`),
      await mintServiceAccountKubeconfig(cluster.admin, eventingNamespace, serviceAccount, 4 * 3_600),
    );
  const env = knativeEnv(eventingNamespace, "knative.dev/eventing");

  const started: ManagedProcess[] = [];
  let netns: LoopbackNetns | undefined;
  const dataPlaneDeployments = dataPlane.filter((m) => m.object.kind === "Deployment");
  const stopAll = async () => {
    await removeWebhookConfigurations(admin, picked);
    // Their pods go with them (the stand-in kubelet stops the processes); a later start makes them again.
    for (const m of dataPlaneDeployments)
      await admin
        .delete(`/apis/apps/v1/namespaces/${eventingNamespace}/deployments/${m.object.metadata?.name}`)
        .catch(() => {});
    for (const p of started.reverse()) await p.stop(5_000);
    await netns?.close();
    await admin.close();
  };
  try {
    const webhook = await startKnativeWebhook(admin, {
      name: "eventing-webhook",
      binary: join(folder, "webhook"),
      args: [`--kubeconfig=${await kubeconfigOf("eventing-webhook")}`],
      logPath: join(dir, "webhook.log"),
      env: env("eventing-webhook", {
        WEBHOOK_NAME: webhookService,
        SINK_BINDING_SELECTION_MODE: "exclusion",
      }),
      namespace: eventingNamespace,
      service: webhookService,
      hostIP,
      // Served through the apiserver: a dry-run create passes Eventing's defaulting and validation.
      admits: () =>
        admin.create(`/apis/sources.knative.dev/v1/namespaces/${eventingNamespace}/pingsources?dryRun=All`, {
          apiVersion: "sources.knative.dev/v1",
          kind: "PingSource",
          metadata: { name: "webhook-probe" },
          spec: { schedule: "* * * * *", sink: { uri: "http://127.0.0.1/" } },
        }),
    });
    started.push(webhook);
    await applyWebhookConfigurations(cluster, "Knative Eventing", picked);

    const startedAt = Date.now();
    netns = await loopbackNetns(dir, "eventing-controller", cluster.info.server);
    const wrapped = netns.wrap([
      join(folder, "controller"),
      `--kubeconfig=${await kubeconfigOf("eventing-controller")}`,
    ]);
    const controller = startProcess("eventing-controller", wrapped[0]!, wrapped.slice(1), {
      logPath: join(dir, "controller.log"),
      // The images of adapters this harness never runs (ApiServerSource, integrations): Eventing
      // reads them at start and writes them into the Deployments it makes for those.
      env: env("eventing-controller", {
        APISERVER_RA_IMAGE: "ko://knative.dev/eventing/cmd/apiserver_receive_adapter",
        AUTH_PROXY_IMAGE: "ko://knative.dev/eventing/cmd/auth_proxy",
      }),
    });
    started.push(controller);
    await waitForLeaderLease(admin, eventingNamespace, "controller.", controller, startedAt);
    const podLogs = join(cluster.info.dir, "pods", `${eventingNamespace}_`);
    for (const m of dataPlaneDeployments)
      await waitForAvailable(admin, m.object.metadata?.name ?? "", podLogs);
    const adapterLog = `${podLogs}${adapterDeployment}`;
    return {
      folder,
      namespace: eventingNamespace,
      controller,
      webhook,
      logs: (lines = 30) =>
        [
          ...[webhook, controller].map((p) => `${p.name}:\n${p.tail(lines)}`),
          `adapter pods: ${adapterLog}*`,
          ...(options.broker ? [`Broker data plane pods: ${podLogs}{mt-broker,imc}-*`] : []),
        ].join("\n"),
      stop: stopAll,
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/** config/core's objects this harness installs: of the Deployments only the PingSource adapter's. */
function kept(m: Manifest): boolean {
  const kind = m.object.kind ?? "";
  if (!installedKinds.has(kind)) return false;
  const name = m.object.metadata?.name ?? "";
  if (kind === "Deployment") return name === adapterDeployment;
  if (kind === "Service") return name === webhookService;
  return true;
}

/** config/core's object as this harness runs it (asRunHere), and the adapter's Deployment on the stand-in kubelet. */
function adjust(
  m: Manifest,
  cluster: SuiteCluster,
  config: Record<string, Record<string, string>>,
): Manifest {
  return m.object.kind === "Deployment" ? onStandInKubelet(m, cluster) : asRunHere(m, config);
}

/** A config map with `config`'s values on top of its own (asRunHere's); any other object as it is. */
function configured(m: Manifest, config: Record<string, Record<string, string>>): Manifest {
  return m.object.kind === "ConfigMap" ? asRunHere(m, config) : m;
}

/** Waits until the Deployment `name` of Eventing's namespace has an available pod. */
async function waitForAvailable(admin: KubeClient, name: string, podLogs: string): Promise<void> {
  await waitFor(
    async () => {
      const d = await admin.get<{ status?: { availableReplicas?: number } }>(
        `/apis/apps/v1/namespaces/${eventingNamespace}/deployments/${name}`,
      );
      return (d.status?.availableReplicas ?? 0) > 0 ? true : undefined;
    },
    {
      what: `${name}'s pod to be Ready`,
      timeoutMs: 90_000,
      intervalMs: 500,
      detail: () => `logs: ${podLogs}${name}-*`,
    },
  );
}

/** A Deployment's pod template with the stand-in kubelet's label and scheduler name, so it runs there. */
function onStandInKubelet(m: Manifest, cluster: SuiteCluster): Manifest {
  const object = m.object as KubernetesObject & Record<string, any>;
  const { kubelet } = cluster.info;
  const template = object.spec.template;
  return {
    ...m,
    object: {
      ...object,
      spec: {
        ...object.spec,
        template: {
          ...template,
          metadata: {
            ...template.metadata,
            labels: { ...template.metadata?.labels, [kubelet.selector.key]: kubelet.selector.value },
          },
          spec: { ...template.spec, schedulerName: kubelet.schedulerName },
        },
      },
    } as KubernetesObject,
  };
}
