import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import type { KubernetesObject } from "@kubernetes/client-node";
import { freePort } from "../../../lib/free-port.ts";
import { KubeClient } from "../../../lib/kube/client.ts";
import { type BuiltComponent, findBuilt, notBuilt } from "../harness/assets.ts";
import { createCA, issueCert } from "../harness/certs.ts";
import { pointServiceAtHost, routableAddress } from "../harness/host-address.ts";
import { mintServiceAccountKubeconfig, writeKubeconfig } from "../harness/kubeconfig.ts";
import {
  applyManifests,
  identityKinds,
  kustomize,
  type Manifest,
  waitForCrds,
} from "../harness/manifests.ts";
import { type ManagedProcess, startProcess } from "../harness/process.ts";
import type { SuiteCluster } from "../harness/suite.ts";
import { waitFor } from "../harness/wait.ts";

/**
 * KEDA in the e2e cluster: its operator (`keda`) and metrics API server (`keda-adapter`) built by
 * hack/build-keda.sh from the pinned Go module, run as processes against the real apiserver with
 * KEDA's own manifests from the same module (CRDs with their kustomize patches, ServiceAccount,
 * RBAC, the external.metrics.k8s.io APIService). The aggregator reaches the adapter through an
 * EndpointSlice at this machine's address; KEDA's operator and adapter talk over mTLS with one
 * certificate pair, as KEDA's cert rotation would give them.
 */
export const kedaNamespace = "keda";
const serviceAccount = "keda-operator";
const metricsService = "keda-metrics-apiserver";
export const externalMetricsAPIService = "v1beta1.external.metrics.k8s.io";

const kedaBuild: BuiltComponent = {
  name: "KEDA",
  script: "build-keda.sh",
  cacheFolder: "keda",
  envVar: "SNOOZE_KEDA_DIR",
  marker: "keda",
};

/**
 * The folder hack/build-keda.sh built (binaries and config/). A test that needs KEDA fails without
 * it, with the command that builds it: a missing binary never turns a test into a skip.
 */
export function requireKeda(): string {
  const folder = findBuilt(kedaBuild);
  if (!folder) throw new Error(notBuilt(kedaBuild));
  return folder;
}

export interface Keda {
  folder: string;
  operator: ManagedProcess;
  adapter: ManagedProcess;
  /** Stops the operator (KEDA "down"); the adapter and the APIService stay. */
  stopOperator(): Promise<void>;
  /** Starts the operator again after stopOperator. */
  startOperator(): Promise<void>;
  /** Stops both and removes the APIService, so the cluster's discovery stays whole for other files. */
  stop(): Promise<void>;
}

const installedKinds = new Set<string>([...identityKinds, "APIService", "Service"]);

/** Installs KEDA's manifests, starts the adapter and the operator, and waits until both serve. */
export async function startKeda(cluster: SuiteCluster, folder: string): Promise<Keda> {
  const dir = join(cluster.info.dir, "keda");
  await mkdir(dir, { recursive: true });
  const kubectl = cluster.info.kubectl;
  const admin = await KubeClient.fromKubeConfig(cluster.admin);
  const hostIP = routableAddress();

  // Certificates: one CA, one pair for the operator's gRPC server, the adapter's client and the
  // adapter's HTTPS serving (what cert rotation would write to the kedaorg-certs Secret).
  const certDir = join(dir, "certs");
  await mkdir(certDir, { recursive: true });
  const ca = await createCA(certDir, "ca");
  await issueCert(ca, certDir, "tls", {
    commonName: "keda",
    ipAddresses: ["127.0.0.1", hostIP],
    dnsNames: [
      "localhost",
      `keda-operator.${kedaNamespace}.svc`,
      `keda-operator.${kedaNamespace}.svc.cluster.local`,
      `${metricsService}.${kedaNamespace}.svc`,
      `${metricsService}.${kedaNamespace}.svc.cluster.local`,
    ],
    usage: "both",
  });

  // KEDA's own manifests, rendered as `kubectl apply -k config/default` would send them. Left out:
  // the Deployments (the binaries run here as processes) and the admission webhooks (not run).
  const rendered = (await kustomize(kubectl, join(folder, "config/default"))).filter((m) =>
    installedKinds.has(m.object.kind ?? ""),
  );
  const services = rendered.filter((m) => m.object.kind === "Service");
  const adjusted: Manifest[] = [
    ...rendered.filter((m) => m.object.kind !== "Service" && m.object.kind !== "APIService"),
    ...services
      .filter((m) => m.object.metadata?.name === metricsService)
      .map((m) => {
        // No selector: no pod backs it; the EndpointSlice below points at the adapter process.
        const spec = { ...(m.object as { spec: Record<string, unknown> }).spec };
        delete spec.selector;
        return { ...m, object: { ...m.object, spec } as KubernetesObject };
      }),
  ];
  const failures = await applyManifests(cluster.admin, adjusted, { dryRun: false });
  if (failures.length > 0) throw new Error(`installing KEDA failed:\n${failures.join("\n")}`);
  await waitForCrds(cluster.admin, [
    "scaledobjects.keda.sh",
    "scaledjobs.keda.sh",
    "triggerauthentications.keda.sh",
    "clustertriggerauthentications.keda.sh",
  ]);

  const kubeconfig = await writeKubeconfig(
    join(dir, "keda-operator.kubeconfig"),
    await mintServiceAccountKubeconfig(cluster.admin, kedaNamespace, serviceAccount, 4 * 3_600),
  );
  const env = {
    ...process.env,
    KUBECONFIG: kubeconfig,
    POD_NAMESPACE: kedaNamespace,
    // Read from the pod's ServiceAccount mount otherwise, which a process here does not have.
    KEDA_CLUSTER_OBJECT_NAMESPACE: kedaNamespace,
    WATCH_NAMESPACE: "",
    KEDA_HTTP_DEFAULT_TIMEOUT: "3000",
  };
  const grpcPort = await freePort();

  // The adapter: an aggregated API server (delegated authentication and authorization through the
  // apiserver, as its ServiceAccount), on this machine's routable address.
  const adapterPort = await freePort(hostIP);
  const adapter = startProcess(
    "keda-adapter",
    join(folder, "keda-adapter"),
    [
      `--secure-port=${adapterPort}`,
      `--bind-address=${hostIP}`,
      `--tls-cert-file=${join(certDir, "tls.crt")}`,
      `--tls-private-key-file=${join(certDir, "tls.key")}`,
      `--cert-dir=${certDir}`,
      `--metrics-service-address=127.0.0.1:${grpcPort}`,
      `--lister-kubeconfig=${kubeconfig}`,
      `--authentication-kubeconfig=${kubeconfig}`,
      `--authorization-kubeconfig=${kubeconfig}`,
      `--port=${await freePort()}`,
      "--zap-log-level=info",
      "--zap-encoder=console",
    ],
    { logPath: join(dir, "keda-adapter.log"), env },
  );

  // The aggregator reaches the adapter through the Service's EndpointSlice (--enable-aggregator-routing).
  await pointServiceAtHost(
    admin,
    { namespace: kedaNamespace, service: metricsService, portName: "https" },
    hostIP,
    adapterPort,
  );
  const apiService = rendered.find((m) => m.object.kind === "APIService");
  if (!apiService) throw new Error("KEDA's config/default has no APIService");
  const apiServiceSpec = { ...(apiService.object as { spec: Record<string, unknown> }).spec };
  delete apiServiceSpec.insecureSkipTLSVerify;
  const apiServiceObject = {
    ...apiService.object,
    spec: { ...apiServiceSpec, caBundle: Buffer.from(ca.certPem).toString("base64") },
  } as KubernetesObject;
  const apiFailures = await applyManifests(cluster.admin, [{ ...apiService, object: apiServiceObject }], {
    dryRun: false,
  });
  if (apiFailures.length > 0)
    throw new Error(`creating KEDA's APIService failed:\n${apiFailures.join("\n")}`);

  const probePort = await freePort();
  let operator = runOperator();
  function runOperator(): ManagedProcess {
    return startProcess(
      "keda-operator",
      join(folder, "keda"),
      [
        "--leader-elect=false",
        "--metrics-bind-address=0",
        `--health-probe-bind-address=127.0.0.1:${probePort}`,
        `--metrics-service-bind-address=127.0.0.1:${grpcPort}`,
        `--cert-dir=${certDir}`,
        "--enable-cert-rotation=false",
        "--zap-log-level=info",
        "--zap-encoder=console",
      ],
      { logPath: join(dir, "keda-operator.log"), env },
    );
  }
  const operatorReady = (process: ManagedProcess) =>
    waitFor(
      async () => {
        const response = await fetch(`http://127.0.0.1:${probePort}/readyz`, {
          signal: AbortSignal.timeout(1_000),
        });
        await response.body?.cancel();
        return response.ok ? true : undefined;
      },
      {
        what: "KEDA's operator /readyz",
        timeoutMs: 60_000,
        intervalMs: 200,
        abort: process.exited,
        detail: () => process.tail(),
      },
    );

  const stopAll = async () => {
    await admin
      .delete(`/apis/apiregistration.k8s.io/v1/apiservices/${externalMetricsAPIService}`)
      .catch(() => {});
    await operator.stop(5_000);
    await adapter.stop(5_000);
    await admin.close();
  };
  try {
    await operatorReady(operator);
    // Served through the aggregator: the APIService is Available and answers discovery.
    await waitFor(
      async () => {
        const service = await admin.get<{ status?: { conditions?: { type: string; status: string }[] } }>(
          `/apis/apiregistration.k8s.io/v1/apiservices/${externalMetricsAPIService}`,
        );
        if (!service.status?.conditions?.some((c) => c.type === "Available" && c.status === "True"))
          return undefined;
        await admin.get("/apis/external.metrics.k8s.io/v1beta1");
        return true;
      },
      {
        what: `APIService ${externalMetricsAPIService} Available (KEDA's adapter through the aggregator)`,
        timeoutMs: 60_000,
        intervalMs: 250,
        abort: adapter.exited,
        detail: () => adapter.tail(),
      },
    );
  } catch (error) {
    await stopAll();
    throw error;
  }

  return {
    folder,
    get operator() {
      return operator;
    },
    adapter,
    stopOperator: () => operator.stop(5_000),
    async startOperator() {
      if (operator.running()) return;
      operator = runOperator();
      await operatorReady(operator);
    },
    stop: stopAll,
  };
}
