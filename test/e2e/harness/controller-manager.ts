import { join } from "node:path";
import type { CoreV1Api } from "@kubernetes/client-node";
import type { ApiServer } from "./apiserver.ts";
import { issueCert } from "./certs.ts";
import { kubeconfigFor, writeKubeconfig } from "./kubeconfig.ts";
import { type ManagedProcess, startProcess } from "./process.ts";
import { waitFor } from "./wait.ts";

/**
 * The controllers the suite needs: Deployments → ReplicaSets → Pods, StatefulSets → Pods, garbage collection of owned
 * objects, namespace deletion, default ServiceAccounts and their tokens, EndpointSlices for
 * Services and their Endpoints (Knative's serverless services read Endpoints), aggregated
 * ClusterRoles (Knative's controller is bound to one), and the HorizontalPodAutoscaler controller (KEDA's ScaledObjects drive Models through
 * the HPA it makes; it acts on HPA objects only, so suites without one never see it). No scheduler:
 * the stand-in kubelet binds its own pods.
 */
export const defaultControllers = [
  "deployment-controller",
  "replicaset-controller",
  "statefulset-controller",
  "garbage-collector-controller",
  "namespace-controller",
  "serviceaccount-controller",
  "serviceaccount-token-controller",
  "root-ca-certificate-publisher-controller",
  "endpointslice-controller",
  "endpoints-controller",
  "clusterrole-aggregation-controller",
  "horizontal-pod-autoscaler-controller",
];

export interface ControllerManager {
  process: ManagedProcess;
  stop(): Promise<void>;
}

/**
 * kube-controller-manager authenticated as system:kube-controller-manager (bootstrap RBAC grants that
 * user what it needs) and, like kubeadm sets it up, running each controller with its own
 * ServiceAccount credentials, so controllers are held to their RBAC too.
 */
export async function startControllerManager(
  binDir: string,
  dir: string,
  apiserver: ApiServer,
  controllers: string[] = defaultControllers,
): Promise<ControllerManager> {
  const endpoint = { server: apiserver.url, caPem: apiserver.servingCA.certPem };
  const cert = await issueCert(apiserver.clientCA, dir, "kube-controller-manager", {
    commonName: "system:kube-controller-manager",
    usage: "client",
  });
  const kubeconfigPath = await writeKubeconfig(
    join(dir, "kube-controller-manager.kubeconfig"),
    kubeconfigFor(endpoint, "system:kube-controller-manager", cert),
  );
  const process = startProcess(
    "kube-controller-manager",
    join(binDir, "kube-controller-manager"),
    [
      `--kubeconfig=${kubeconfigPath}`,
      `--controllers=${controllers.join(",")}`,
      "--leader-elect=false",
      "--use-service-account-credentials=true",
      `--service-account-private-key-file=${apiserver.serviceAccountKey.privatePath}`,
      `--root-ca-file=${apiserver.servingCA.certPath}`,
      // No serving endpoint: nothing scrapes it, and a port is one more thing to collide.
      "--secure-port=0",
      // Time-compressed HPA: every HPA is looked at each second (default 15 s); how fast it may
      // scale down stays the HPA's own behavior (a ScaledObject sets it), not a flag here.
      "--horizontal-pod-autoscaler-sync-period=1s",
    ],
    { logPath: join(dir, "kube-controller-manager.log") },
  );
  return { process, stop: () => process.stop() };
}

/** Waits until the controllers work: the default ServiceAccount of `default` exists. */
export async function waitForControllers(
  core: CoreV1Api,
  manager: ControllerManager,
  timeoutMs = 60_000,
): Promise<void> {
  await waitFor(
    async () => {
      await core.readNamespacedServiceAccount({ name: "default", namespace: "default" });
      return true;
    },
    {
      what: "kube-controller-manager to create the default ServiceAccount",
      timeoutMs,
      intervalMs: 250,
      abort: manager.process.exited,
      detail: () => manager.process.tail(),
    },
  );
}
