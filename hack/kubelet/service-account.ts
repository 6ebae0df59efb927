import { readFileSync } from "node:fs";
import { mkdir, rename, rm, writeFile } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";
import type { CoreV1Api, KubeConfig, V1Pod } from "@kubernetes/client-node";
import { type Clock, systemClock } from "../../lib/clock.ts";
import type { PodNetwork } from "./pod-network.ts";

/**
 * Where a pod's processes reach the API server. In a cluster that is the `kubernetes` Service; here
 * the API server listens on the host's loopback, which a pod with a network namespace of its own
 * cannot reach, so the kubelet forwards the node's address on the pod network (`hostIP`, every
 * pod's default gateway) to it. `tlsServerName` is the name the API server's certificate holds.
 */
export interface ApiserverForPods {
  server: string;
  /** `server`'s host and port: the endpoint of the `kubernetes` Service, as pods reach it. */
  address?: { host: string; port: number };
  tlsServerName?: string;
  close(): Promise<void>;
}

export async function apiserverForPods(kc: KubeConfig, network: PodNetwork): Promise<ApiserverForPods> {
  const server = kc.getCurrentCluster()?.server;
  if (!server) throw new Error("the kubeconfig names no API server");
  const target = new URL(server);
  if (network.kind === "loopback") return { server, close: async () => {} };
  const sockets = new Set<Socket>();
  // Half-open kept, so a client that ends its side still hears the answer.
  const forwarder: Server = createServer({ allowHalfOpen: true }, (inside) => {
    const outside = connect({
      allowHalfOpen: true,
      host: target.hostname.replace(/^\[|\]$/g, ""),
      port: Number(target.port || 443),
    });
    for (const s of [inside, outside]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        inside.destroy();
        outside.destroy();
      });
    }
    inside.pipe(outside);
    outside.pipe(inside);
  });
  await new Promise<void>((resolve, reject) => {
    forwarder.once("error", reject);
    forwarder.listen(0, network.hostIP, () => resolve());
  });
  const { port } = forwarder.address() as { port: number };
  return {
    server: `https://${network.hostIP}:${port}`,
    address: { host: network.hostIP, port },
    tlsServerName: target.hostname.replace(/^\[|\]$/g, ""),
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => forwarder.close(() => resolve()));
    },
  };
}

/** A pod's ServiceAccount credentials while it runs: the env its containers get, and how to end them. */
export interface PodCredentials {
  env: Record<string, string>;
  stop(): Promise<void>;
}

/** A projected ServiceAccount token's life when the pod does not say (the kubelet's default). */
const tokenSeconds = 3_600;

/** How soon a refresh that failed is tried again. */
const refreshRetryMs = 10_000;

export interface PodCredentialsOptions {
  /** Where each pod's token and kubeconfig are written (a folder per pod). */
  dir: string;
  /** A refresh failed: it is tried again after `refreshRetryMs`, and the old token serves until then. */
  onRefreshError: (error: unknown) => void;
  clock?: Clock;
}

/**
 * What the kubelet's projected ServiceAccount volume gives a pod, for processes that share the
 * host's filesystem: a token of the pod's ServiceAccount that the API server binds to the pod (a
 * TokenRequest with the pod as its bound object, so it dies with the pod), written to a file and
 * written again at 80% of its life as the kubelet does, and a kubeconfig naming that file and
 * `apiserver`, in `KUBECONFIG` (read by client-go's and Knative's main functions where a real pod
 * would find /var/run/secrets/kubernetes.io/serviceaccount). None for a pod with
 * `automountServiceAccountToken: false`.
 */
export async function podCredentials(
  core: CoreV1Api,
  kc: KubeConfig,
  apiserver: ApiserverForPods,
  pod: V1Pod,
  { dir, onRefreshError, clock = systemClock }: PodCredentialsOptions,
): Promise<PodCredentials | undefined> {
  if (pod.spec?.automountServiceAccountToken === false) return undefined;
  const namespace = pod.metadata?.namespace ?? "default";
  const name = pod.metadata?.name ?? "";
  const serviceAccount = pod.spec?.serviceAccountName || "default";
  const folder = join(dir, `${namespace}_${name}`);
  await mkdir(folder, { recursive: true, mode: 0o700 });
  const tokenPath = join(folder, "token");

  const writeToken = async (): Promise<number> => {
    const answer = await core.createNamespacedServiceAccountToken({
      name: serviceAccount,
      namespace,
      body: {
        apiVersion: "authentication.k8s.io/v1",
        kind: "TokenRequest",
        spec: {
          audiences: [],
          expirationSeconds: tokenSeconds,
          boundObjectRef: { apiVersion: "v1", kind: "Pod", name, uid: pod.metadata?.uid },
        },
      },
    });
    const status = answer.status;
    if (!status?.token)
      throw new Error(`the API server gave no token for ServiceAccount ${namespace}/${serviceAccount}`);
    // Replaced in one rename, so a reader never sees half a token.
    await writeFile(`${tokenPath}.new`, status.token, { mode: 0o600 });
    await rename(`${tokenPath}.new`, tokenPath);
    const expires = status.expirationTimestamp
      ? new Date(status.expirationTimestamp).getTime()
      : clock.now() + tokenSeconds * 1_000;
    return Math.max(1_000, 0.8 * (expires - clock.now()));
  };

  let timer: { cancel(): void } | undefined;
  let stopped = false;
  const schedule = (ms: number) => {
    if (stopped) return;
    timer = clock.setTimeout(() => {
      writeToken().then(schedule, (error: unknown) => {
        if (stopped) return;
        onRefreshError(error);
        schedule(refreshRetryMs);
      });
    }, ms);
  };
  schedule(await writeToken());

  const kubeconfigPath = join(folder, "kubeconfig");
  await writeFile(kubeconfigPath, kubeconfigFor(kc, apiserver, tokenPath), { mode: 0o600 });
  return {
    env: { KUBECONFIG: kubeconfigPath },
    async stop() {
      stopped = true;
      timer?.cancel();
      await rm(folder, { recursive: true, force: true });
    },
  };
}

/** A kubeconfig (JSON is YAML) for `apiserver` with the cluster's CA and the token in `tokenPath`. */
function kubeconfigFor(kc: KubeConfig, apiserver: ApiserverForPods, tokenPath: string): string {
  const cluster = kc.getCurrentCluster();
  const caData =
    cluster?.caData ?? (cluster?.caFile ? readFileSync(cluster.caFile).toString("base64") : undefined);
  return JSON.stringify({
    apiVersion: "v1",
    kind: "Config",
    clusters: [
      {
        name: "cluster",
        cluster: {
          server: apiserver.server,
          // client-go refuses a CA together with skipping verification.
          ...(cluster?.skipTLSVerify
            ? { "insecure-skip-tls-verify": true }
            : caData
              ? { "certificate-authority-data": caData }
              : {}),
          ...(apiserver.tlsServerName ? { "tls-server-name": apiserver.tlsServerName } : {}),
        },
      },
    ],
    users: [{ name: "pod", user: { tokenFile: tokenPath } }],
    contexts: [{ name: "pod", context: { cluster: "cluster", user: "pod" } }],
    "current-context": "pod",
  });
}
