import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, fstatSync, openSync, readSync } from "node:fs";
import { mkdir } from "node:fs/promises";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  CoreV1Api,
  type Informer,
  type KubeConfig,
  makeInformer,
  type ObjectCache,
  PatchStrategy,
  setHeaderOptions,
  type V1Pod,
} from "@kubernetes/client-node";
import type { Logger } from "../../lib/log.ts";
import { type ContainerLaunch, containerLaunches } from "./container-launch.ts";
import { httpProbe } from "./http-probe.ts";
import { registerNode, statusOf } from "./node.ts";
import type { PodAddress, PodNetwork } from "./pod-network.ts";
import { type ContainerRun, type Exit, gatesTrue, podStatus } from "./pod-status.ts";
import { apiserverForPods, type PodCredentials, podCredentials } from "./service-account.ts";
import { proxyEnv, serviceResolver, serviceRouterAnnotation, startServiceRouter } from "./service-router.ts";

export interface KubeletOptions {
  nodeName: string;
  /** Label selector of the pods this kubelet runs, e.g. `snooze.dev/stand-in=true`. */
  selector: string;
  network: PodNetwork;
  /** Where each pod's sim writes its output (`<namespace>_<pod>.log`). */
  logDir: string;
  /** The argv that starts `snooze`; `sim ...` is appended. */
  snoozeCommand?: string[];
  /** Images and the local binary each runs as (Knative's queue-proxy, Knative Eventing's adapter). */
  images?: ReadonlyMap<string, string>;
  log: Logger;
}

export interface Kubelet {
  stop(): Promise<void>;
}

/** One pod as this kubelet runs it: a process per container, all in the pod's network. */
interface PodRecord {
  key: string;
  uid: string;
  namespace: string;
  name: string;
  address: PodAddress;
  credentials?: PodCredentials;
  startTime: Date;
  containers: ContainerRecord[];
  stopping: boolean;
  timers: Set<NodeJS.Timeout>;
}

interface ContainerRecord {
  launch: ContainerLaunch;
  restartCount: number;
  run: ContainerRun;
  child?: ChildProcess;
  exited?: Promise<Exit>;
  probeFailures: number;
}

const repoRoot = resolve(import.meta.dirname, "../..");
const maxBackoffMs = 10_000;

/**
 * A stand-in for the kubelet, enough for Snooze's e2e tests: it binds pods that carry the test
 * label to one fake node, runs each container whose image is mapped as that local binary and an
 * unmapped first container as `snooze sim`, on the pod's own address, with the pod's ServiceAccount
 * credentials (service-account.ts), reports the pod status
 * (Running, Ready from the readiness checks, pod IP, one status per container) and stops the
 * processes when the pod goes.
 */
export async function startKubelet(kc: KubeConfig, options: KubeletOptions): Promise<Kubelet> {
  const { log, network, nodeName } = options;
  const core = kc.makeApiClient(CoreV1Api);
  const snooze = options.snoozeCommand ?? [process.execPath, join(repoRoot, "bin/snooze.js")];
  const images = options.images ?? new Map<string, string>();
  const pods = new Map<string, PodRecord>();
  const queues = new Map<string, Promise<void>>();
  let stopped = false;
  await mkdir(options.logDir, { recursive: true });
  // Tokens are secrets: beside the logs, in a folder only this user reads.
  const credentialsDir = join(options.logDir, ".credentials");
  await mkdir(credentialsDir, { recursive: true, mode: 0o700 });
  const apiserver = await apiserverForPods(kc, network);
  // Cluster DNS and kube-proxy for the pods' HTTP, where pods have addresses of their own.
  const router =
    network.kind === "netns"
      ? await startServiceRouter(serviceResolver(kc, { apiserver: apiserver.address }), {
          host: network.hostIP,
        })
      : undefined;
  const routerEnv = router ? proxyEnv(router.url, [network.hostIP]) : {};

  const stopLease = await registerNode(
    kc,
    {
      name: nodeName,
      hostIP: network.hostIP,
      annotations: { [serviceRouterAnnotation]: router?.url ?? "" },
    },
    log,
  );

  const informer: Informer<V1Pod> & ObjectCache<V1Pod> = makeInformer(
    kc,
    "/api/v1/pods",
    () => core.listPodForAllNamespaces({ labelSelector: options.selector }),
    options.selector,
  );

  /** Work on one pod runs in order; different pods proceed in parallel. */
  const enqueue = (key: string, work: () => Promise<void>) => {
    const previous = queues.get(key) ?? Promise.resolve();
    const next = previous
      .then(work)
      .catch((error: unknown) => log.error("pod sync failed", { pod: key, error }))
      .finally(() => {
        if (queues.get(key) === next) queues.delete(key);
      });
    queues.set(key, next);
  };
  const keyOf = (pod: V1Pod) => `${pod.metadata?.namespace}/${pod.metadata?.name}`;
  const latest = (record: PodRecord) => informer.get(record.name, record.namespace);

  const writeStatus = async (record: PodRecord) => {
    const current = latest(record);
    if (!current || current.metadata?.uid !== record.uid) return;
    const status = podStatus(
      {
        hostIP: network.hostIP,
        podIP: record.address.ip,
        startTime: record.startTime,
        containers: record.containers.map((c) => ({
          name: c.launch.name,
          image: c.launch.image,
          restartCount: c.restartCount,
          run: c.run,
          pid: c.child?.pid,
        })),
        readinessGates: readinessGatesOf(current),
        ref: { name: record.name, namespace: record.namespace, uid: record.uid },
      },
      current.status,
      new Date(),
    );
    try {
      await core.patchNamespacedPodStatus(
        { name: record.name, namespace: record.namespace, body: { status } },
        // Strategic merge, as the kubelet patches: conditions merge by type, so the conditions other
        // controllers own (readiness gates) stay as they wrote them.
        setHeaderOptions("Content-Type", PatchStrategy.StrategicMergePatch),
      );
    } catch (error) {
      if (statusOf(error) !== 404) throw error;
    }
  };

  /**
   * An image that cannot be pulled: `ErrImagePull`, then `ImagePullBackOff` while the next try
   * waits (1 s, doubling to 10 s, as crashes do), then again, until the pod goes.
   */
  const pullFails = (record: PodRecord, container: ContainerRecord, message: string, tries: number) => {
    container.run = { state: "pull-failed", message, backoff: false };
    log.warn("cannot pull image", { pod: record.key, container: container.launch.name, reason: message });
    const later = (ms: number, step: () => void) => {
      const timer = setTimeout(() => {
        record.timers.delete(timer);
        enqueue(record.key, async () => {
          if (record.stopping || stopped) return;
          step();
          await writeStatus(record);
        });
      }, ms);
      record.timers.add(timer);
    };
    later(1_000, () => {
      container.run = { state: "pull-failed", message, backoff: true };
      later(Math.min(maxBackoffMs, 1_000 * 2 ** tries), () =>
        pullFails(record, container, message, tries + 1),
      );
    });
  };

  /**
   * A container whose env names a Secret (or a key of it) that is not there does not start: the
   * kubelet's `CreateContainerConfigError` with its words, tried again every 2 s (the kubelet
   * retries the pod's sync) until the Secret is there or the pod goes. After the image's pull, as
   * the kubelet makes the container's config only once it has the image.
   */
  const startContainer = async (record: PodRecord, container: ContainerRecord) => {
    const { secretEnv = [], program } = container.launch;
    if (program.kind !== "unpullable") {
      for (const ref of secretEnv) {
        let data: Record<string, string> | undefined;
        try {
          data =
            (await core.readNamespacedSecret({ name: ref.secret, namespace: record.namespace })).data ?? {};
        } catch (error) {
          if (statusOf(error) !== 404) throw error;
        }
        const value = data?.[ref.key];
        if (value !== undefined) {
          container.launch.env[ref.env] = Buffer.from(value, "base64").toString();
          continue;
        }
        if (ref.optional) continue;
        const message =
          data === undefined
            ? `secret "${ref.secret}" not found`
            : `couldn't find key ${ref.key} in Secret ${record.namespace}/${ref.secret}`;
        container.run = { state: "unrunnable", reason: "CreateContainerConfigError", message };
        log.warn("cannot make the container's config", {
          pod: record.key,
          container: container.launch.name,
          reason: message,
        });
        const timer = setTimeout(() => {
          record.timers.delete(timer);
          enqueue(record.key, async () => {
            if (record.stopping || stopped) return;
            await startContainer(record, container);
            await writeStatus(record);
          });
        }, 2_000);
        record.timers.add(timer);
        return;
      }
    }
    runContainer(record, container);
  };

  const runContainer = (record: PodRecord, container: ContainerRecord) => {
    const { program } = container.launch;
    if (program.kind === "unpullable") {
      pullFails(record, container, program.message, 0);
      return;
    }
    if (program.kind === "unrunnable") {
      container.run = { state: "unrunnable", reason: program.reason, message: program.message };
      log.warn("cannot run container", {
        pod: record.key,
        container: container.launch.name,
        reason: program.message,
      });
      return;
    }
    const command =
      program.kind === "sim"
        ? [...snooze, "sim", "--host", record.address.listenHost, ...program.args]
        : [program.path, ...program.args];
    const argv = record.address.wrap(command);
    // One log per pod as before for the model container; a sidecar's goes next to it.
    const suffix = container === record.containers[0] ? "" : `_${container.launch.name}`;
    const logPath = join(options.logDir, `${record.namespace}_${record.name}${suffix}.log`);
    const fd = openSync(logPath, "a");
    const startedAt = new Date();
    let child: ChildProcess;
    try {
      child = spawn(argv[0]!, argv.slice(1), {
        stdio: ["ignore", fd, fd],
        env: { ...process.env, ...container.launch.env },
      });
    } finally {
      closeSync(fd);
    }
    container.child = child;
    container.run = { state: "running", startedAt, ready: container.launch.readiness === undefined };
    container.probeFailures = 0;
    container.exited = new Promise<Exit>((resolveExit) => {
      const done = (code: number | null, signal: string | null) => {
        // FallbackToLogsOnError: a failed exit's message is the tail of what it wrote.
        const failed = code !== 0;
        const message = failed && container.launch.logsOnError ? logTail(logPath) : undefined;
        resolveExit({ code, signal, startedAt, finishedAt: new Date(), ...(message ? { message } : {}) });
      };
      child.once("exit", done);
      child.once("error", () => done(127, null));
    });
    log.info("container started", {
      pod: record.key,
      container: container.launch.name,
      ip: record.address.ip,
      pid: child.pid,
      args: program.args,
    });
    void container.exited.then((exit) => {
      if (container.child !== child) return;
      container.child = undefined;
      if (record.stopping || stopped) return;
      enqueue(record.key, () => onExit(record, container, exit));
    });
    if (container.launch.readiness) void probeLoop(record, container, child);
  };

  const onExit = async (record: PodRecord, container: ContainerRecord, exit: Exit) => {
    log.warn("container exited", {
      pod: record.key,
      container: container.launch.name,
      code: exit.code,
      signal: exit.signal,
    });
    const policy = latest(record)?.spec?.restartPolicy ?? "Always";
    const restart = policy === "Always" || (policy === "OnFailure" && exit.code !== 0);
    const delay = Math.min(maxBackoffMs, 1_000 * 2 ** container.restartCount);
    container.run = restart
      ? { state: "backoff", lastExit: exit, delayMs: delay }
      : { state: "exited", lastExit: exit };
    await writeStatus(record);
    if (!restart) return;
    const timer = setTimeout(() => {
      record.timers.delete(timer);
      enqueue(record.key, async () => {
        if (record.stopping || stopped) return;
        container.restartCount++;
        await startContainer(record, container);
        await writeStatus(record);
      });
    }, delay);
    record.timers.add(timer);
  };

  /** Readiness: HTTP GET on the pod IP, like the kubelet's httpGet probe, until the container exits. */
  const probeLoop = async (record: PodRecord, container: ContainerRecord, child: ChildProcess) => {
    const readiness = container.launch.readiness!;
    if (readiness.initialDelayMs > 0) await sleep(readiness.initialDelayMs);
    while (container.child === child && !record.stopping && !stopped) {
      const result = await httpProbe(
        record.address.ip,
        readiness.port,
        readiness.path,
        Math.max(1_000, readiness.periodMs),
        readiness.headers,
        readiness.scheme,
      );
      const ok = result.ok;
      if (!result.ok && (container.probeFailures + 1) % 10 === 0) {
        log.warn("readiness probe failing", {
          pod: record.key,
          container: container.launch.name,
          failures: container.probeFailures + 1,
          reason: result.reason,
        });
      }
      if (container.child !== child || container.run.state !== "running") break;
      container.probeFailures = ok ? 0 : container.probeFailures + 1;
      const ready = ok ? true : container.probeFailures < readiness.failureThreshold && container.run.ready;
      if (ready !== container.run.ready) {
        container.run = { ...container.run, ready };
        log.info(ready ? "container ready" : "container not ready", {
          pod: record.key,
          container: container.launch.name,
        });
        enqueue(record.key, () => writeStatus(record));
      }
      await sleep(readiness.periodMs);
    }
  };

  /** SIGTERM to every container at once (as the kubelet does), SIGKILL after the grace period. */
  const stopPod = async (record: PodRecord, graceMs: number) => {
    record.stopping = true;
    for (const timer of record.timers) clearTimeout(timer);
    record.timers.clear();
    await Promise.all(
      record.containers.map(async (container) => {
        const { child, exited } = container;
        if (child && exited && child.exitCode === null && child.signalCode === null) {
          child.kill("SIGTERM");
          const kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
          await exited;
          clearTimeout(kill);
        }
        container.child = undefined;
      }),
    );
    await record.credentials?.stop();
    await network.release(record.address.ip);
    log.info("pod stopped", { pod: record.key });
  };

  const sync = async (key: string) => {
    if (stopped) return;
    const [namespace, name] = key.split("/") as [string, string];
    const pod = informer.get(name, namespace);
    const record = pods.get(key);
    if (record && (!pod || pod.metadata?.uid !== record.uid)) {
      // Deleted for good (or replaced by a new pod of the same name): stop what ran for it.
      pods.delete(key);
      await stopPod(record, 2_000);
    }
    if (!pod) return;
    if (!pod.spec?.nodeName) {
      if (pod.metadata?.deletionTimestamp) return;
      await core.createNamespacedPodBinding({
        name,
        namespace,
        body: { metadata: { name, namespace }, target: { apiVersion: "v1", kind: "Node", name: nodeName } },
      });
      log.info("pod bound", { pod: key, node: nodeName });
      return; // The update event of the binding brings us back here.
    }
    if (pod.spec.nodeName !== nodeName) return;
    const current = pods.get(key);
    if (pod.metadata?.deletionTimestamp) {
      if (current) {
        pods.delete(key);
        const graceSeconds = pod.metadata.deletionGracePeriodSeconds ?? 30;
        await stopPod(current, Math.min(graceSeconds, 30) * 1_000);
      }
      // What the kubelet does once the containers are gone: finish the graceful deletion.
      try {
        await core.deleteNamespacedPod({
          name,
          namespace,
          // In the body: with only the query parameter the pod stayed terminating (seen with client-node 2.0.1).
          body: { gracePeriodSeconds: 0, preconditions: { uid: pod.metadata.uid } },
        });
        log.info("pod deleted", { pod: key });
      } catch (error) {
        // Gone already, or replaced by a new pod of the same name: nothing left to finish.
        if (statusOf(error) !== 404 && statusOf(error) !== 409) throw error;
      }
      return;
    }
    if (current) {
      // A readiness gate's condition changed (its controller wrote it): Ready follows, as the kubelet's does.
      const ready = pod.status?.conditions?.find((c) => c.type === "Ready")?.status === "True";
      const containersReady = current.containers.every((c) => c.run.state === "running" && c.run.ready);
      if (ready !== (containersReady && gatesTrue(readinessGatesOf(pod), pod.status)))
        await writeStatus(current);
      return;
    }
    const phase = pod.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") return;
    const address = await network.allocate();
    let launches: ContainerLaunch[];
    try {
      // After the address: the downward API's status.podIP is part of the env.
      launches = containerLaunches(pod, { podIP: address.ip, hostIP: network.hostIP, nodeName }, images);
    } catch (error) {
      await network.release(address.ip);
      log.error("cannot run pod", { pod: key, error });
      return;
    }
    let credentials: PodCredentials | undefined;
    try {
      credentials = await podCredentials(core, kc, apiserver, pod, {
        dir: credentialsDir,
        onRefreshError: (error) =>
          log.warn("cannot refresh the pod's ServiceAccount token", { pod: key, error }),
      });
    } catch (error) {
      await network.release(address.ip);
      log.error("cannot make the pod's ServiceAccount token", { pod: key, error });
      return;
    }
    // The pod's own env wins, as a container's env would over what its image sets.
    for (const launch of launches) launch.env = { ...routerEnv, ...credentials?.env, ...launch.env };
    const fresh: PodRecord = {
      key,
      uid: pod.metadata?.uid ?? "",
      namespace,
      name,
      address,
      credentials,
      startTime: new Date(),
      containers: launches.map((launch) => ({
        launch,
        restartCount: 0,
        run: { state: "starting" },
        probeFailures: 0,
      })),
      stopping: false,
      timers: new Set(),
    };
    pods.set(key, fresh);
    for (const container of fresh.containers) await startContainer(fresh, container);
    await writeStatus(fresh);
  };

  const onEvent = (pod: V1Pod) => enqueue(keyOf(pod), () => sync(keyOf(pod)));
  informer.on("add", onEvent);
  informer.on("update", onEvent);
  informer.on("delete", onEvent);
  informer.on("error", (error: unknown) => {
    if (stopped) return;
    log.warn("pod watch broke; restarting", { error });
    setTimeout(() => {
      if (!stopped)
        informer.start().catch((e: unknown) => log.error("pod watch restart failed", { error: e }));
    }, 1_000).unref();
  });
  await informer.start();
  log.info("stand-in kubelet running", {
    node: nodeName,
    selector: options.selector,
    network: network.kind,
    serviceRouter: router?.url,
  });

  return {
    async stop() {
      stopped = true;
      stopLease();
      await informer.stop();
      await Promise.allSettled([...queues.values()]);
      await Promise.allSettled([...pods.values()].map((record) => stopPod(record, 5_000)));
      pods.clear();
      await apiserver.close();
      await router?.close();
      await network.close();
    },
  };
}

/**
 * The end of a container's log, as the kubelet takes it for `FallbackToLogsOnError`: at most the
 * last 80 lines and 2,048 bytes.
 */
function logTail(path: string): string | undefined {
  try {
    const fd = openSync(path, "r");
    try {
      const size = fstatSync(fd).size;
      const length = Math.min(size, 2_048);
      const buffer = Buffer.alloc(length);
      readSync(fd, buffer, 0, length, size - length);
      const text = buffer.toString("utf8").split("\n").slice(-81).join("\n").trim();
      return text || undefined;
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
}

/** The condition types a pod's readiness gates name. */
function readinessGatesOf(pod: V1Pod): string[] {
  return (pod.spec?.readinessGates ?? []).map((g) => g.conditionType);
}
