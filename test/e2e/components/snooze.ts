import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { freePort } from "../../../lib/free-port.ts";
import { group, version } from "../../../lib/kube/api-group.ts";
import { KubeClient, paths } from "../../../lib/kube/client.ts";
import { awakeCondition, type Pod } from "../../../lib/kube/pod-replica.ts";
import { repoRoot } from "../harness/assets.ts";
import { writeKubeconfig } from "../harness/kubeconfig.ts";
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
 * Snooze's own components in the e2e cluster: `snooze autoscaler` and `snooze activator` as real
 * processes, each with a kubeconfig minted for its own ServiceAccount (so it has exactly the RBAC of
 * config/, nothing more), and helpers to make sim-backed Deployments and Models.
 */
export const system = "snooze-system";

/** The identity part of config/default: namespace, CRDs, ServiceAccounts, RBAC. */
export async function identityManifests(cluster: SuiteCluster): Promise<Manifest[]> {
  const rendered = await kustomize(cluster.info.kubectl, `${repoRoot}/config/default`);
  const kinds = new Set<string>(identityKinds);
  return rendered.filter((m) => kinds.has(m.object.kind ?? ""));
}

/** Applies the identity part of config/default for real. */
export async function installIdentities(cluster: SuiteCluster): Promise<void> {
  const failures = await applyManifests(cluster.admin, await identityManifests(cluster), { dryRun: false });
  if (failures.length > 0) throw new Error(`installing identities failed:\n${failures.join("\n")}`);
  await waitForCrds(cluster.admin, ["models.snooze.dev", "slots.snooze.dev"]);
}

/** A kubeconfig file for `system/<serviceAccount>`, for a component process. */
export async function serviceAccountKubeconfig(
  cluster: SuiteCluster,
  serviceAccount: string,
): Promise<string> {
  const kc = await cluster.asServiceAccount(system, serviceAccount);
  const dir = join(cluster.info.dir, "components");
  await mkdir(dir, { recursive: true });
  return writeKubeconfig(join(dir, `${serviceAccount}-${Date.now()}.kubeconfig`), kc);
}

export interface Component {
  name: string;
  url: string;
  port: number;
  /** An autoscaler's KEDA external scaler (gRPC), `127.0.0.1:<port>`. */
  grpcAddress?: string;
  process: ManagedProcess;
  stop(graceMs?: number): Promise<void>;
  state(): Promise<any>;
}

async function startComponent(
  cluster: SuiteCluster,
  name: string,
  args: string[],
  port: number,
  env: Record<string, string> = {},
  host = "127.0.0.1",
): Promise<Component> {
  const dir = join(cluster.info.dir, "components");
  await mkdir(dir, { recursive: true });
  const child = startProcess(name, process.execPath, [join(repoRoot, "bin/snooze.js"), ...args], {
    logPath: join(dir, `${name}.log`),
    cwd: repoRoot,
    env: { ...process.env, SNOOZE_LOG_LEVEL: process.env.SNOOZE_LOG_LEVEL ?? "info", ...env },
  });
  const url = `http://${host}:${port}`;
  await waitFor(
    async () => {
      const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(1_000) });
      await response.body?.cancel();
      return response.ok ? true : undefined;
    },
    {
      what: `${name} ready`,
      timeoutMs: 30_000,
      intervalMs: 100,
      abort: child.exited,
      detail: () => child.tail(),
    },
  );
  return {
    name,
    url,
    port,
    process: child,
    stop: (graceMs = 10_000) => child.stop(graceMs),
    state: async () => (await fetch(`${url}/snooze/v1/state`)).json(),
  };
}

/** Lease timing for tests: leadership moves within about two seconds. */
export const fastLeases = [
  "--lease-duration",
  "2s",
  "--lease-renew-deadline",
  "1500ms",
  "--lease-retry",
  "200ms",
];

export async function startAutoscaler(
  cluster: SuiteCluster,
  options: {
    namespace: string;
    identity: string;
    kubeconfig: string;
    extra?: string[];
    /** More environment (e.g. the standard OTEL_* variables). */
    env?: Record<string, string>;
    /** `--shutdown-delay`: none by default, so a suite's teardown and failovers do not wait for it. */
    shutdownDelay?: string;
  },
): Promise<Component> {
  const port = await freePort();
  const grpcPort = await freePort();
  const component = await startComponent(
    cluster,
    options.identity,
    [
      "autoscaler",
      "--kubeconfig",
      options.kubeconfig,
      "--namespace",
      options.namespace,
      "--lease-namespace",
      system,
      "--identity",
      options.identity,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      // Other replicas forward demand here: loopback, never the machine's own address.
      "--advertise-address",
      `http://127.0.0.1:${port}`,
      "--grpc-port",
      String(grpcPort),
      "--drain-grace",
      "300ms",
      "--shutdown-delay",
      options.shutdownDelay ?? "0s",
      ...fastLeases,
      ...(options.extra ?? []),
    ],
    port,
    options.env,
  );
  return { ...component, grpcAddress: `127.0.0.1:${grpcPort}` };
}

export async function startActivator(
  cluster: SuiteCluster,
  options: {
    namespace: string;
    identity: string;
    kubeconfig: string;
    autoscalerUrl: string;
    env?: Record<string, string>;
    /** The address it listens on (default 127.0.0.1); a pod reaches the node's pod-network address. */
    host?: string;
    /** `--shutdown-delay`: none by default, so a suite's teardown does not wait for it. */
    shutdownDelay?: string;
  },
): Promise<Component> {
  const host = options.host ?? "127.0.0.1";
  const port = await freePort(host);
  return startComponent(
    cluster,
    options.identity,
    [
      "activator",
      "--kubeconfig",
      options.kubeconfig,
      "--namespace",
      options.namespace,
      "--identity",
      options.identity,
      "--autoscaler-url",
      options.autoscalerUrl,
      "--host",
      host,
      "--port",
      String(port),
      "--shutdown-grace",
      "2s",
      "--shutdown-delay",
      options.shutdownDelay ?? "0s",
    ],
    port,
    options.env,
    host,
  );
}

/** A Deployment whose pods the stand-in kubelet runs as `snooze sim` serving `model`. */
export function simDeployment(
  cluster: SuiteCluster,
  name: string,
  options: {
    model: string;
    replicas?: number;
    annotations?: Record<string, string>;
    loadTime?: string;
    extraArgs?: string[];
    /** The engine container's image (the stand-in kubelet runs a sim whatever it is, unless it cannot be pulled). */
    image?: string;
    terminationMessagePolicy?: "File" | "FallbackToLogsOnError";
    /** A sidecar container beside the engine, with this image (one under `.invalid` cannot be pulled). */
    sidecarImage?: string;
    /** The engine's environment besides vLLM's dev mode (e.g. `VLLM_ENABLE_RESPONSES_API_STORE`). */
    env?: Record<string, string>;
  },
) {
  const { kubelet } = cluster.info;
  const labels = { app: name, [kubelet.selector.key]: kubelet.selector.value };
  return {
    apiVersion: "apps/v1",
    kind: "Deployment",
    metadata: { name, annotations: options.annotations ?? {} },
    spec: {
      replicas: options.replicas ?? 0,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          schedulerName: kubelet.schedulerName,
          terminationGracePeriodSeconds: 2,
          // As the mutating webhook gives every model workload: Ready only while the engine is awake.
          readinessGates: [{ conditionType: awakeCondition }],
          containers: [
            {
              name: "vllm",
              image: options.image ?? "vllm/vllm-openai:v0.11.0",
              ...(options.terminationMessagePolicy
                ? { terminationMessagePolicy: options.terminationMessagePolicy }
                : {}),
              args: [
                "Qwen/Qwen3-0.6B",
                "--served-model-name",
                options.model,
                "--enable-sleep-mode",
                "--load-time",
                options.loadTime ?? "300ms",
                "--sleep-time-l1",
                "100ms",
                "--wake-time-l1",
                "200ms",
                "--sleep-time-l2",
                "50ms",
                "--wake-time-l2",
                "100ms",
                "--reload-time",
                "200ms",
                "--ttft",
                "10ms",
                "--itl",
                "2ms",
                ...(options.extraArgs ?? []),
              ],
              env: [
                { name: "VLLM_SERVER_DEV_MODE", value: "1" },
                ...Object.entries(options.env ?? {}).map(([name, value]) => ({ name, value })),
              ],
              ports: [{ name: "http", containerPort: 8000 }],
              readinessProbe: { httpGet: { path: "/health", port: "http" }, periodSeconds: 1 },
            },
            ...(options.sidecarImage ? [{ name: "auth-proxy", image: options.sidecarImage }] : []),
          ],
        },
      },
    },
  };
}

export function modelObject(name: string, spec: Record<string, unknown>) {
  return {
    apiVersion: `${group}/${version}`,
    kind: "Model",
    metadata: { name },
    spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name }, ...spec },
  };
}

/**
 * Models on one slot, as on one GPU: a sim Deployment and a Model per entry of `models`, all the
 * sims claiming the same simulated 24 GiB GPU (a second awake engine does not fit, as with vLLM),
 * and the Slot, sticky with no residency or cooldown so swaps come at once.
 */
export async function createSharedGpuSlot(
  admin: Admin,
  namespace: string,
  cluster: SuiteCluster,
  slot: string,
  models: string[],
): Promise<void> {
  const gpu = ["--gpu-id", slot, "--gpu-dir", join(cluster.info.dir, "gpu"), "--gpu-memory", "24GiB"];
  for (const model of models) {
    await admin.createDeployment(namespace, simDeployment(cluster, model, { model, extraArgs: gpu }));
    await admin.createModel(namespace, modelObject(model, { model, slot, sleepAfter: "1m", port: 8000 }));
  }
  await admin.client.create(paths.custom(group, version, "slots", namespace), {
    apiVersion: `${group}/${version}`,
    kind: "Slot",
    metadata: { name: slot },
    spec: { policy: "sticky", minResidency: "0s", swapCooldown: "0s", drainTimeout: "10s" },
  });
}

/** Plain-JSON access to the cluster as the admin, for test steps and checks. */
export async function adminClient(cluster: SuiteCluster) {
  const client = await KubeClient.fromKubeConfig(cluster.admin);
  return {
    client,
    createDeployment: (ns: string, body: unknown) => client.create(paths.apps("deployments", ns), body),
    createModel: (ns: string, body: unknown) =>
      client.create(paths.custom(group, version, "models", ns), body),
    model: (ns: string, name: string) =>
      client.get<any>(`${paths.custom(group, version, "models", ns)}/${name}`),
    deployment: (ns: string, name: string) => client.get<any>(`${paths.apps("deployments", ns)}/${name}`),
    /** The pods of one app, or of several in one list: one snapshot, read at one moment. */
    pods: async (ns: string, app: string | readonly string[]) =>
      (
        await client.list<Pod>(paths.pods(ns), {
          labelSelector: typeof app === "string" ? `app=${app}` : `app in (${app.join(",")})`,
        })
      ).items.filter((p) => !p.metadata.deletionTimestamp),
    /**
     * Every `spec.replicas` a Model is written with from now on, as the apiserver's watch tells each
     * write (a sampler can miss one overwritten within its period), until `signal` aborts.
     */
    watchModelReplicas: async (
      ns: string,
      name: string,
      signal: AbortSignal,
      written: (replicas: number | undefined) => void,
    ) => {
      const path = paths.custom(group, version, "models", ns);
      const now = await client.get<any>(`${path}/${name}`);
      return client
        .watch<any>(
          path,
          { fieldSelector: `metadata.name=${name}`, resourceVersion: now.metadata.resourceVersion },
          (event) => written(event.object?.spec?.replicas),
          signal,
        )
        .catch((error) => {
          if (!signal.aborted) throw error;
        });
    },
    /** What `kubectl scale model` does: a merge patch of the scale subresource. */
    scaleModel: (ns: string, name: string, replicas: number) =>
      client.patch(`${paths.custom(group, version, "models", ns)}/${name}/scale`, { spec: { replicas } }),
  };
}

export type Admin = Awaited<ReturnType<typeof adminClient>>;

export const tierOf = (pod: Pod) => pod.metadata.annotations?.["snooze.dev/tier"];

/** Sends an OpenAI completion through the activator; resolves with status, body and time taken. */
export async function complete(activatorUrl: string, model: string, timeoutMs = 60_000) {
  const started = performance.now();
  const response = await fetch(`${activatorUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "hello", max_tokens: 3 }),
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await response.text();
  return { status: response.status, text, ms: performance.now() - started };
}

/** How the autoscaler at `url` answered its callers so far: accepted, 401, 403, 503 (snooze_autoscaler_callers_total). */
export async function callerOutcomes(url: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${url}/metrics`)).text();
  const outcomes: Record<string, number> = {};
  for (const line of text.split("\n")) {
    const match = /^snooze_autoscaler_callers_total\{outcome="([^"]+)"\} (\S+)$/.exec(line);
    if (match) outcomes[match[1]!] = Number(match[2]);
  }
  return outcomes;
}

/** The simulator's own view of an engine: whether any request reached it while asleep. */
export async function simState(ip: string): Promise<{ isSleeping: boolean; arrivedWhileAsleep: number }> {
  const response = await fetch(`http://${ip}:8000/sim/state`, { signal: AbortSignal.timeout(2_000) });
  return (await response.json()) as { isSleeping: boolean; arrivedWhileAsleep: number };
}

/**
 * A stand-in for the `snooze-autoscaler` Service (the harness has no kube-proxy): each POST goes to
 * the next autoscaler in turn, and to the one after it when that one does not answer, as a Service
 * with endpoints does for the replicas that are up.
 */
export async function serviceStandIn(targets: () => string[]): Promise<{ url: string; close(): void }> {
  const { createServer } = await import("node:http");
  let next = 0;
  const server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = Buffer.concat(chunks);
    const list = targets();
    for (let i = 0; i < list.length; i++) {
      const target = list[(next + i) % list.length]!;
      try {
        const answer = await fetch(`${target}${req.url}`, {
          method: req.method,
          // As a Service does, the caller's headers go through: its token is what the autoscaler
          // checks, its traceparent what the activation continues.
          headers: {
            "content-type": "application/json",
            ...Object.fromEntries(
              ["authorization", "traceparent", "tracestate"]
                .filter((name) => typeof req.headers[name] === "string")
                .map((name) => [name, req.headers[name] as string]),
            ),
          },
          body: req.method === "POST" ? body : undefined,
          signal: AbortSignal.timeout(1_000),
        });
        res.writeHead(answer.status, { "content-type": "application/json" });
        res.end(await answer.text());
        next = (next + i + 1) % list.length;
        return;
      } catch {
        // That replica is down: the Service's next endpoint.
      }
    }
    res.writeHead(503);
    res.end();
  });
  const port = await freePort();
  server.listen(port, "127.0.0.1");
  await new Promise((resolve) => server.once("listening", resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}
