import { constants } from "node:os";
import type {
  V1ContainerState,
  V1ContainerStatus,
  V1PodCondition,
  V1PodStatus,
} from "@kubernetes/client-node";

const { signals } = constants;

/** What the stand-in kubelet knows about one container of a pod. */
export type ContainerRun =
  | { state: "starting" }
  | { state: "running"; startedAt: Date; ready: boolean }
  /** Exited; restarted after `delayMs` (the kubelet's crash back-off). */
  | { state: "backoff"; lastExit: Exit; delayMs?: number }
  | { state: "exited"; lastExit: Exit }
  /** Never started: the stand-in kubelet cannot run it (an image without a binary mapped to it). */
  | { state: "unrunnable"; reason: string; message: string }
  /**
   * Its image cannot be pulled (`message`: why, as the runtime says): `ErrImagePull` right after a
   * try, `ImagePullBackOff` while the kubelet waits to try again.
   */
  | { state: "pull-failed"; message: string; backoff: boolean };

export interface Exit {
  code: number | null;
  signal: string | null;
  startedAt: Date;
  finishedAt: Date;
  /** The termination message (`terminationMessagePolicy: FallbackToLogsOnError`: the log's tail). */
  message?: string;
}

export interface ContainerReport {
  name: string;
  image: string;
  restartCount: number;
  run: ContainerRun;
  /** The process id, shown as the container id so a person can find the process. */
  pid?: number;
}

export interface PodRun {
  hostIP: string;
  podIP: string;
  startTime: Date;
  /** In the pod's order. */
  containers: ContainerReport[];
  /** The pod's readiness gates (`spec.readinessGates[].conditionType`): Ready also waits for them. */
  readinessGates?: string[];
  /** The pod, as the kubelet names it in its messages (`back-off 10s restarting failed container=...`). */
  ref?: { name: string; namespace: string; uid: string };
}

/**
 * The pod status a kubelet would report for `pod`: phase, the five standard conditions, IPs and
 * one status per container. Condition transition times carry over from `previous` when unchanged,
 * as the real kubelet keeps them.
 */
export function podStatus(pod: PodRun, previous: V1PodStatus | undefined, now: Date): V1PodStatus {
  const isReady = (c: ContainerReport) => c.run.state === "running" && c.run.ready;
  const ready = pod.containers.every(isReady);
  const gatesOpen = gatesTrue(pod.readinessGates, previous);
  const own = [
    condition("PodReadyToStartContainers", true),
    condition("Initialized", true),
    // As the kubelet does: Ready needs every container ready and every readiness gate's condition True.
    condition("Ready", ready && gatesOpen),
    condition("ContainersReady", ready),
    condition("PodScheduled", true),
  ];
  const conditions: V1PodCondition[] = own.map((c) => {
    const before = previous?.conditions?.find((p) => p.type === c.type);
    return {
      ...c,
      lastTransitionTime: before && before.status === c.status ? before.lastTransitionTime : now,
    };
  });
  // As the kubelet: Succeeded or Failed once every container has terminated for good.
  const exits = pod.containers.map((c) => (c.run.state === "exited" ? c.run.lastExit : undefined));
  const phase = exits.every((e) => e !== undefined)
    ? exits.every((e) => e?.code === 0)
      ? "Succeeded"
      : "Failed"
    : "Running";
  return {
    phase,
    conditions,
    hostIP: pod.hostIP,
    hostIPs: [{ ip: pod.hostIP }],
    podIP: pod.podIP,
    podIPs: [{ ip: pod.podIP }],
    startTime: pod.startTime,
    containerStatuses: pod.containers.map((c) => containerStatus(c, isReady(c), pod.ref)),
  };
}

function containerStatus(c: ContainerReport, ready: boolean, ref: PodRun["ref"]): V1ContainerStatus {
  const exit = c.run.state === "backoff" || c.run.state === "exited" ? c.run.lastExit : undefined;
  return {
    name: c.name,
    image: c.image,
    imageID: "",
    containerID: c.pid !== undefined ? `snooze-sim://${c.pid}` : undefined,
    ready,
    started: c.run.state === "running",
    restartCount: c.restartCount,
    state: containerState(c, ref),
    lastState: exit && c.run.state === "backoff" ? { terminated: terminated(exit) } : {},
  };
}

/** Whether every readiness gate's condition is True in `status` (no gates: true). */
export function gatesTrue(gates: string[] | undefined, status: V1PodStatus | undefined): boolean {
  return (gates ?? []).every((type) =>
    status?.conditions?.some((c) => c.type === type && c.status === "True"),
  );
}

function condition(type: string, status: boolean): Omit<V1PodCondition, "lastTransitionTime"> {
  return { type, status: status ? "True" : "False" };
}

function containerState({ run, name, image }: ContainerReport, ref: PodRun["ref"]): V1ContainerState {
  switch (run.state) {
    case "starting":
      return { waiting: { reason: "ContainerCreating" } };
    case "running":
      return { running: { startedAt: run.startedAt } };
    case "backoff": {
      // The kubelet's words; the exit itself is in lastState.
      const delay = `${Math.round((run.delayMs ?? 0) / 1_000)}s`;
      const pod = ref ? ` pod=${ref.name}_${ref.namespace}(${ref.uid})` : "";
      return {
        waiting: {
          reason: "CrashLoopBackOff",
          message: `back-off ${delay} restarting failed container=${name}${pod}`,
        },
      };
    }
    case "exited":
      return { terminated: terminated(run.lastExit) };
    case "unrunnable":
      return { waiting: { reason: run.reason, message: run.message } };
    case "pull-failed":
      return run.backoff
        ? {
            waiting: {
              reason: "ImagePullBackOff",
              message: `Back-off pulling image "${image}": ErrImagePull: ${run.message}`,
            },
          }
        : { waiting: { reason: "ErrImagePull", message: run.message } };
  }
}

function terminated(exit: Exit) {
  return {
    // Killed by a signal: 128 + its number, as a container runtime reports it.
    exitCode: exit.code ?? 128 + (signals[exit.signal as keyof typeof signals] ?? 9),
    signal: undefined,
    reason: exit.code === 0 ? "Completed" : "Error",
    // As the kubelet: the termination message only (none unless the policy takes the log's tail).
    message: exit.message,
    startedAt: exit.startedAt,
    finishedAt: exit.finishedAt,
  };
}
