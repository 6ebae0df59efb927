import {
  CoordinationV1Api,
  CoreV1Api,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
  V1MicroTime,
  type V1Node,
} from "@kubernetes/client-node";
import type { Logger } from "../../lib/log.ts";

export interface NodeOptions {
  name: string;
  hostIP: string;
  /** Annotations the node carries (set on every start, so a reused node gets this run's). */
  annotations?: Record<string, string>;
  /** How often the node Lease is renewed, as a real kubelet does every 10 s. */
  leaseRenewMs?: number;
}

/**
 * Registers the fake node (Ready, with the host address) and keeps its Lease in kube-node-lease
 * fresh, so a real cluster's node lifecycle controller does not mark it unreachable and evict its
 * pods. Resolves to a function that stops the renewal.
 */
export async function registerNode(kc: KubeConfig, options: NodeOptions, log: Logger): Promise<() => void> {
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  const labels = {
    "kubernetes.io/hostname": options.name,
    "kubernetes.io/os": "linux",
    "snooze.dev/stand-in": "true",
  };
  const node: V1Node = {
    metadata: { name: options.name, labels },
    spec: {
      // Only pods that ask for the stand-in may land here on a real cluster with a scheduler.
      taints: [{ key: "snooze.dev/stand-in", value: "true", effect: "NoSchedule" }],
    },
  };
  try {
    await core.createNode({ body: node });
  } catch (error) {
    if (statusOf(error) !== 409) throw error;
  }
  if (options.annotations)
    await core.patchNode(
      { name: options.name, body: { metadata: { annotations: options.annotations } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  const now = new Date();
  const current = await core.readNode({ name: options.name });
  current.status = {
    ...current.status,
    conditions: [
      {
        type: "Ready",
        status: "True",
        reason: "KubeletReady",
        message: "snooze stand-in kubelet is posting ready status",
        lastHeartbeatTime: now,
        lastTransitionTime: now,
      },
    ],
    addresses: [
      { type: "InternalIP", address: options.hostIP },
      { type: "Hostname", address: options.name },
    ],
    capacity: { cpu: "64", memory: "256Gi", pods: "250" },
    allocatable: { cpu: "64", memory: "256Gi", pods: "250" },
    nodeInfo: {
      architecture: process.arch === "x64" ? "amd64" : process.arch,
      bootID: "",
      containerRuntimeVersion: "snooze-sim://0",
      kernelVersion: "",
      kubeProxyVersion: "",
      kubeletVersion: "stand-in",
      machineID: "",
      operatingSystem: "linux",
      osImage: "snooze stand-in kubelet",
      systemUUID: "",
    },
  };
  await core.replaceNodeStatus({ name: options.name, body: current });

  const renew = async () => {
    const leaseName = options.name;
    const namespace = "kube-node-lease";
    // MicroTime: the apiserver wants microseconds, which a plain Date does not serialize to.
    const spec = { holderIdentity: options.name, leaseDurationSeconds: 40, renewTime: new V1MicroTime() };
    try {
      const lease = await coordination.readNamespacedLease({ name: leaseName, namespace });
      lease.spec = { ...lease.spec, ...spec };
      await coordination.replaceNamespacedLease({ name: leaseName, namespace, body: lease });
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
      await coordination.createNamespacedLease({ namespace, body: { metadata: { name: leaseName }, spec } });
    }
  };
  await renew().catch((error: unknown) => log.warn("node lease renewal failed", { error }));
  const timer = setInterval(() => {
    renew().catch((error: unknown) => log.warn("node lease renewal failed", { error }));
  }, options.leaseRenewMs ?? 10_000);
  timer.unref();
  return () => clearInterval(timer);
}

/** The HTTP status of a client-node error, when it has one. */
export function statusOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | undefined)?.code;
  return typeof code === "number" ? code : undefined;
}
