import { existsSync } from "node:fs";
import { KubeConfig } from "@kubernetes/client-node";

/** Where a component's identity comes from, for its start-up log line. */
export type KubeconfigSource = "flag" | "KUBECONFIG" | "in-cluster";

/**
 * The API server and identity a component talks with, chosen explicitly: `--kubeconfig` (for
 * development), else `$KUBECONFIG`, else the pod's own ServiceAccount (in-cluster: the token and CA
 * mounted under /var/run/secrets/kubernetes.io/serviceaccount and KUBERNETES_SERVICE_HOST).
 * Anything else is an error rather than a guess (no silent fallback to ~/.kube/config or
 * localhost:8080, which would run a controller against the wrong cluster).
 */
export function loadKubeConfig(flag: string | undefined): { kc: KubeConfig; source: KubeconfigSource } {
  const kc = new KubeConfig();
  if (flag) {
    kc.loadFromFile(flag);
    return { kc, source: "flag" };
  }
  const fromEnv = process.env.KUBECONFIG?.split(":").find((path) => path && existsSync(path));
  if (fromEnv) {
    kc.loadFromFile(fromEnv);
    return { kc, source: "KUBECONFIG" };
  }
  if (process.env.KUBERNETES_SERVICE_HOST && existsSync(serviceAccountTokenPath)) {
    kc.loadFromCluster();
    return { kc, source: "in-cluster" };
  }
  throw new Error(
    "no Kubernetes API to talk to: pass --kubeconfig <file>, set KUBECONFIG, or run in a pod with a ServiceAccount token",
  );
}

export const serviceAccountTokenPath = "/var/run/secrets/kubernetes.io/serviceaccount/token";
