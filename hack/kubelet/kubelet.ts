import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync } from "node:fs";
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
import { httpProbe } from "./http-probe.ts";
import { registerNode, statusOf } from "./node.ts";
import type { PodAddress, PodNetwork } from "./pod-network.ts";
import { type ContainerRun, type Exit, gatesTrue, podStatus } from "./pod-status.ts";
import { type SimLaunch, simLaunch } from "./sim-launch.ts";

export interface KubeletOptions {
  nodeName: string;
  /** Label selector of the pods this kubelet runs, e.g. `snooze.dev/stand-in=true`. */
  selector: string;
  network: PodNetwork;
  /** Where each pod's sim writes its output (`<namespace>_<pod>.log`). */
  logDir: string;
  /** The argv that starts `snooze`; `sim ...` is appended. */
  snoozeCommand?: string[];
  log: Logger;
}

export interface Kubelet {
  stop(): Promise<void>;
}

/** One pod's sim as this kubelet runs it. */
interface PodRecord {
  key: string;
  uid: string;
  namespace: string;
  name: string;
  launch: SimLaunch;
  address: PodAddress;
  startTime: Date;
  restartCount: number;
  run: ContainerRun;
  child?: ChildProcess;
  exited?: Promise<Exit>;
  stopping: boolean;
  probeFailures: number;
  timers: Set<NodeJS.Timeout>;
}

const repoRoot = resolve(import.meta.dirname, "../..");
const maxBackoffMs = 10_000;

/**
 * A stand-in for the kubelet, enough for Snooze's e2e tests: it binds pods that carry the test
 * label to one fake node, runs one `snooze sim` per pod on the pod's own address, reports the pod
 * status (Running, Ready from the readiness check, pod IP) and stops the sim when the pod goes.
 */
export async function startKubelet(kc: KubeConfig, options: KubeletOptions): Promise<Kubelet> {
  const { log, network, nodeName } = options;
  const core = kc.makeApiClient(CoreV1Api);
  const snooze = options.snoozeCommand ?? [process.execPath, join(repoRoot, "bin/snooze.js")];
  const pods = new Map<string, PodRecord>();
  const queues = new Map<string, Promise<void>>();
  let stopped = false;
  await mkdir(options.logDir, { recursive: true });

  const stopLease = await registerNode(kc, { name: nodeName, hostIP: network.hostIP }, log);

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
        container: record.launch.container,
        image: current.spec?.containers[0]?.image ?? "",
        restartCount: record.restartCount,
        run: record.run,
        pid: record.child?.pid,
        readinessGates: readinessGatesOf(current),
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

  const startSim = (record: PodRecord) => {
    const argv = record.address.wrap([...snooze, "sim", "--host", record.address.ip, ...record.launch.args]);
    const logPath = join(options.logDir, `${record.namespace}_${record.name}.log`);
    const fd = openSync(logPath, "a");
    const startedAt = new Date();
    let child: ChildProcess;
    try {
      child = spawn(argv[0]!, argv.slice(1), {
        stdio: ["ignore", fd, fd],
        env: { ...process.env, ...record.launch.env },
      });
    } finally {
      closeSync(fd);
    }
    record.child = child;
    record.run = { state: "running", startedAt, ready: false };
    record.probeFailures = 0;
    record.exited = new Promise<Exit>((resolveExit) => {
      const done = (code: number | null, signal: string | null) =>
        resolveExit({ code, signal, startedAt, finishedAt: new Date() });
      child.once("exit", done);
      child.once("error", () => done(127, null));
    });
    log.info("sim started", {
      pod: record.key,
      ip: record.address.ip,
      pid: child.pid,
      args: record.launch.args,
    });
    void record.exited.then((exit) => {
      if (record.child !== child) return;
      record.child = undefined;
      if (record.stopping || stopped) return;
      enqueue(record.key, () => onSimExit(record, exit));
    });
    void probeLoop(record, child);
  };

  const onSimExit = async (record: PodRecord, exit: Exit) => {
    log.warn("sim exited", { pod: record.key, code: exit.code, signal: exit.signal });
    const policy = latest(record)?.spec?.restartPolicy ?? "Always";
    const restart = policy === "Always" || (policy === "OnFailure" && exit.code !== 0);
    record.run = restart ? { state: "backoff", lastExit: exit } : { state: "exited", lastExit: exit };
    await writeStatus(record);
    if (!restart) return;
    const delay = Math.min(maxBackoffMs, 1_000 * 2 ** record.restartCount);
    const timer = setTimeout(() => {
      record.timers.delete(timer);
      enqueue(record.key, async () => {
        if (record.stopping || stopped) return;
        record.restartCount++;
        startSim(record);
        await writeStatus(record);
      });
    }, delay);
    record.timers.add(timer);
  };

  /** Readiness: HTTP GET on the pod IP, like the kubelet's httpGet probe, until the sim exits. */
  const probeLoop = async (record: PodRecord, child: ChildProcess) => {
    const { readiness } = record.launch;
    if (readiness.initialDelayMs > 0) await sleep(readiness.initialDelayMs);
    while (record.child === child && !record.stopping && !stopped) {
      const result = await httpProbe(
        record.address.ip,
        readiness.port,
        readiness.path,
        Math.max(1_000, readiness.periodMs),
      );
      const ok = result.ok;
      if (!result.ok && (record.probeFailures + 1) % 10 === 0) {
        log.warn("readiness probe failing", {
          pod: record.key,
          failures: record.probeFailures + 1,
          reason: result.reason,
        });
      }
      if (record.child !== child || record.run.state !== "running") break;
      record.probeFailures = ok ? 0 : record.probeFailures + 1;
      const ready = ok ? true : record.probeFailures < readiness.failureThreshold && record.run.ready;
      if (ready !== record.run.ready) {
        record.run = { ...record.run, ready };
        log.info(ready ? "pod ready" : "pod not ready", { pod: record.key });
        enqueue(record.key, () => writeStatus(record));
      }
      await sleep(readiness.periodMs);
    }
  };

  const stopSim = async (record: PodRecord, graceMs: number) => {
    record.stopping = true;
    for (const timer of record.timers) clearTimeout(timer);
    record.timers.clear();
    const { child, exited } = record;
    if (child && exited && child.exitCode === null && child.signalCode === null) {
      child.kill("SIGTERM");
      const kill = setTimeout(() => child.kill("SIGKILL"), graceMs);
      await exited;
      clearTimeout(kill);
    }
    record.child = undefined;
    await network.release(record.address.ip);
    log.info("sim stopped", { pod: record.key });
  };

  const sync = async (key: string) => {
    if (stopped) return;
    const [namespace, name] = key.split("/") as [string, string];
    const pod = informer.get(name, namespace);
    const record = pods.get(key);
    if (record && (!pod || pod.metadata?.uid !== record.uid)) {
      // Deleted for good (or replaced by a new pod of the same name): stop what ran for it.
      pods.delete(key);
      await stopSim(record, 2_000);
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
        await stopSim(current, Math.min(graceSeconds, 30) * 1_000);
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
      const containersReady = current.run.state === "running" && current.run.ready;
      if (ready !== (containersReady && gatesTrue(readinessGatesOf(pod), pod.status)))
        await writeStatus(current);
      return;
    }
    const phase = pod.status?.phase;
    if (phase === "Succeeded" || phase === "Failed") return;
    let launch: SimLaunch;
    try {
      launch = simLaunch(pod);
    } catch (error) {
      log.error("cannot run pod", { pod: key, error });
      return;
    }
    const address = await network.allocate();
    const fresh: PodRecord = {
      key,
      uid: pod.metadata?.uid ?? "",
      namespace,
      name,
      launch,
      address,
      startTime: new Date(),
      restartCount: 0,
      run: { state: "starting" },
      stopping: false,
      probeFailures: 0,
      timers: new Set(),
    };
    pods.set(key, fresh);
    startSim(fresh);
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
  log.info("stand-in kubelet running", { node: nodeName, selector: options.selector, network: network.kind });

  return {
    async stop() {
      stopped = true;
      stopLease();
      await informer.stop();
      await Promise.allSettled([...queues.values()]);
      await Promise.allSettled([...pods.values()].map((record) => stopSim(record, 5_000)));
      pods.clear();
      await network.close();
    },
  };
}

/** The condition types a pod's readiness gates name. */
function readinessGatesOf(pod: V1Pod): string[] {
  return (pod.spec?.readinessGates ?? []).map((g) => g.conditionType);
}
