import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { beforeAll } from "vitest";
import type { Pod } from "../../../lib/kube/pod-replica.ts";
import { repoRoot } from "../harness/assets.ts";
import { parseManifests } from "../harness/manifests.ts";
import {
  findKnativeEventing,
  type KnativeEventing,
  knativeEventingMissing,
  startKnativeEventing,
} from "./knative-eventing.ts";
import { type KubeSnoozeSuite, kubeSnoozeSuite } from "./kube-suite.ts";
import { type Component, modelObject, simDeployment } from "./snooze.ts";

/**
 * What the Knative Eventing e2e files share: a namespace with the samples' Model `qwen` (cold, a
 * sim Deployment behind it, `sleepAfter: 2s`, a prewarm budget), a real Knative Eventing with its
 * sender identity on (`authentication-oidc: enabled`), a Broker's data plane when asked, and
 * `snooze activator` on the node's address (where pods reach it) with an admin token, so a
 * sender's own token is never the admin's.
 */
export interface EventingSuite {
  suite: KubeSnoozeSuite;
  model: string;
  eventing(): KnativeEventing;
  activator(): Component;
  /** The node's address on the pod network: where pods reach the activator (and servers the test runs). */
  nodeIP(): string;
  /** The objects of config/samples/<file>, as parsed from YAML. */
  sample(file: string): Promise<any[]>;
  /** The collection path of `object`'s kind in the test namespace. */
  pathOf(object: { apiVersion: string; kind: string }): string;
  pods(): Promise<Pod[]>;
  /** The last lines of Eventing's, the activator's and the autoscaler's logs, for failure messages. */
  logs(): string;
}

export function knativeEventingSuite(options: {
  namespace: string;
  broker?: boolean;
  /** Runs before the activator and Eventing stop (a source's finalizer needs Eventing's controller). */
  beforeStop?(suite: KubeSnoozeSuite): Promise<void>;
}): EventingSuite {
  const folder = findKnativeEventing();
  const model = "qwen";
  let eventing: KnativeEventing | undefined;
  let activator: Component | undefined;
  let nodeIP: string | undefined;
  const suite = kubeSnoozeSuite({
    namespace: options.namespace,
    objects: async ({ admin, ns, cluster }) => {
      await admin.createDeployment(ns.name, simDeployment(cluster, model, { model, loadTime: "500ms" }));
      await admin.createModel(
        ns.name,
        modelObject(model, { model, sleepAfter: "2s", maxReplicas: 1, port: 8000, prewarmBudget: "10m" }),
      );
    },
    teardown: async () => {
      await options.beforeStop?.(suite);
      await activator?.stop();
      await eventing?.stop();
    },
  });

  beforeAll(async () => {
    if (!folder) throw new Error(knativeEventingMissing());
    eventing = await startKnativeEventing(suite.cluster, folder, {
      config: { "config-features": { "authentication-oidc": "enabled" } },
      broker: options.broker,
    });
    // Where the pods reach it: the node's address on the pod network (their default gateway).
    const node = await suite.admin.client.get<{ status: { addresses: { type: string; address: string }[] } }>(
      `/api/v1/nodes/${suite.cluster.info.kubelet.nodeName}`,
    );
    nodeIP = node.status.addresses.find((a) => a.type === "InternalIP")!.address;
    // With an admin token, as on a cluster: the sender's token is not it.
    activator = await suite.startActivator(
      "activator-events",
      undefined,
      { SNOOZE_ADMIN_TOKEN: "e2e-admin" },
      nodeIP,
    );
  }, 300_000);

  const set = <T>(value: T | undefined, what: string): T => {
    if (value === undefined) throw new Error(`${what} is not set up yet (beforeAll failed or has not run)`);
    return value;
  };
  const samplesDir = join(repoRoot, "config/samples");
  return {
    suite,
    model,
    eventing: () => set(eventing, "Knative Eventing"),
    activator: () => set(activator, "the activator"),
    nodeIP: () => set(nodeIP, "the node's address"),
    sample: async (file) =>
      parseManifests(await readFile(join(samplesDir, file), "utf8"), file).map((m) => m.object as any),
    pathOf: (object) => {
      const group = object.apiVersion.includes("/")
        ? `/apis/${object.apiVersion}`
        : `/api/${object.apiVersion}`;
      return `${group}/namespaces/${suite.ns.name}/${object.kind.toLowerCase()}s`;
    },
    pods: () => suite.admin.pods(suite.ns.name, model),
    logs: () =>
      `${eventing?.logs(15)}\nactivator-events:\n${activator?.process.tail(20)}\n${suite.logs(20, 0)}`,
  };
}
