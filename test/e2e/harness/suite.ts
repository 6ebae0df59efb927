import { KubeConfig } from "@kubernetes/client-node";
import { inject } from "vitest";
import { mintServiceAccountKubeconfig, mintUserKubeconfig } from "./kubeconfig.ts";

/**
 * What the global setup hands to every test file: enough to rebuild the cluster's identities in
 * the test worker (the processes themselves belong to the setup).
 */
export interface SuiteClusterInfo {
  kind: "local" | "existing";
  dir: string;
  kubeconfigPath: string;
  kubectl: string;
  /** Local control plane only: the client CA that user identities are minted from. */
  clientCA?: { name: string; certPath: string; keyPath: string; certPem: string };
  /** Local control plane only: kube-apiserver's process, which an outage test pauses. */
  apiserverPid?: number;
  server: string;
  caPem: string;
  kubelet: {
    nodeName: string;
    schedulerName: string;
    selector: { key: string; value: string };
    network: string;
  };
}

declare module "vitest" {
  export interface ProvidedContext {
    snoozeCluster: SuiteClusterInfo;
  }
}

export interface SuiteCluster {
  info: SuiteClusterInfo;
  admin: KubeConfig;
  asUser(user: string, groups?: string[]): Promise<KubeConfig>;
  asServiceAccount(namespace: string, name: string): Promise<KubeConfig>;
}

/** The cluster the global setup started (or found), seen from a test file. */
export function suiteCluster(): SuiteCluster {
  const info = inject("snoozeCluster");
  const admin = new KubeConfig();
  admin.loadFromFile(info.kubeconfigPath);
  return {
    info,
    admin,
    asUser: async (user, groups = []) => {
      if (!info.clientCA) throw new Error("asUser needs the local control plane; use a ServiceAccount");
      return mintUserKubeconfig(
        { server: info.server, caPem: info.caPem },
        info.clientCA,
        info.dir,
        user,
        groups,
      );
    },
    asServiceAccount: (namespace, name) => mintServiceAccountKubeconfig(admin, namespace, name),
  };
}
