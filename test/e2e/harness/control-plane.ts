import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { CoreV1Api, KubeConfig } from "@kubernetes/client-node";
import { type ApiServer, startApiServer } from "./apiserver.ts";
import { findAssets } from "./assets.ts";
import type { CertificateAuthority } from "./certs.ts";
import { type ControllerManager, startControllerManager, waitForControllers } from "./controller-manager.ts";
import { type Etcd, startEtcd } from "./etcd.ts";
import {
  kubeconfigFor,
  mintServiceAccountKubeconfig,
  mintUserKubeconfig,
  writeKubeconfig,
} from "./kubeconfig.ts";

/** A Kubernetes control plane the suite talks to: one it started, or an existing cluster. */
export interface TestCluster {
  kind: "local" | "existing";
  /** Working folder: logs, certificates, kubeconfigs. */
  dir: string;
  /** A kubeconfig file with cluster-admin rights (for kubectl and other programs). */
  kubeconfigPath: string;
  admin: KubeConfig;
  /** kubectl from the same build (local) or from KUBEBUILDER_ASSETS/PATH (existing). */
  kubectl: string;
  /** Local control plane only: the CA whose client certificates the apiserver trusts. */
  clientCA?: CertificateAuthority;
  /** Acts as `user` in `groups` (client certificate). Only on the local control plane. */
  asUser(user: string, groups?: string[]): Promise<KubeConfig>;
  /** Acts as the ServiceAccount `namespace/name` (TokenRequest token). */
  asServiceAccount(namespace: string, name: string): Promise<KubeConfig>;
  /** Stops everything it started and removes `dir` (kept when SNOOZE_E2E_KEEP is set). */
  stop(): Promise<void>;
}

export interface LocalControlPlane extends TestCluster {
  kind: "local";
  binDir: string;
  etcd: Etcd;
  apiserver: ApiServer;
  controllerManager?: ControllerManager;
}

export interface StartOptions {
  /** Also start kube-controller-manager (default true). */
  controllerManager?: boolean;
}

/**
 * etcd, kube-apiserver and kube-controller-manager from KUBEBUILDER_ASSETS (or the build cache),
 * on loopback, in a fresh temp folder. When a step fails, whatever already started is stopped
 * before the error is thrown.
 */
export async function startControlPlane(options: StartOptions = {}): Promise<LocalControlPlane> {
  const binDir = findAssets();
  const dir = await mkdtemp(join(tmpdir(), "snooze-e2e-"));
  const started: { stop(): Promise<void> }[] = [];
  const stopAll = async () => {
    for (const part of started.reverse()) await part.stop().catch(() => {});
    started.length = 0;
  };
  try {
    const etcd = await startEtcd(binDir, dir);
    started.push(etcd);
    const apiserver = await startApiServer(binDir, dir, etcd.url);
    started.push(apiserver);
    const endpoint = { server: apiserver.url, caPem: apiserver.servingCA.certPem };
    const admin = kubeconfigFor(endpoint, "snooze-e2e-admin", apiserver.admin);
    const kubeconfigPath = await writeKubeconfig(join(dir, "admin.kubeconfig"), admin);
    let controllerManager: ControllerManager | undefined;
    if (options.controllerManager !== false) {
      controllerManager = await startControllerManager(binDir, dir, apiserver);
      started.push(controllerManager);
      await waitForControllers(admin.makeApiClient(CoreV1Api), controllerManager);
    }
    return {
      kind: "local",
      dir,
      binDir,
      kubeconfigPath,
      admin,
      kubectl: join(binDir, "kubectl"),
      clientCA: apiserver.clientCA,
      etcd,
      apiserver,
      controllerManager,
      asUser: (user, groups = []) => mintUserKubeconfig(endpoint, apiserver.clientCA, dir, user, groups),
      asServiceAccount: (namespace, name) => mintServiceAccountKubeconfig(admin, namespace, name),
      async stop() {
        await stopAll();
        if (!process.env.SNOOZE_E2E_KEEP) await rm(dir, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await stopAll();
    throw error;
  }
}

/**
 * The cluster of the current kubeconfig context (USE_EXISTING_CLUSTER=true), e.g. a kind cluster.
 * Nothing is started or stopped; users cannot be minted (no access to the client CA), so tests act
 * as ServiceAccounts there.
 */
export async function useExistingCluster(): Promise<TestCluster> {
  const admin = new KubeConfig();
  admin.loadFromDefault();
  const dir = await mkdtemp(join(tmpdir(), "snooze-e2e-"));
  const kubeconfigPath = await writeKubeconfig(join(dir, "admin.kubeconfig"), admin);
  let kubectl = "kubectl";
  try {
    kubectl = join(findAssets(), "kubectl");
  } catch {
    // kubectl from PATH.
  }
  return {
    kind: "existing",
    dir,
    kubeconfigPath,
    admin,
    kubectl,
    asUser: async () => {
      throw new Error("asUser needs the local control plane (its client CA); use a ServiceAccount");
    },
    asServiceAccount: (namespace, name) => mintServiceAccountKubeconfig(admin, namespace, name),
    async stop() {
      await rm(dir, { recursive: true, force: true });
    },
  };
}

export const usingExistingCluster = () => process.env.USE_EXISTING_CLUSTER === "true";
