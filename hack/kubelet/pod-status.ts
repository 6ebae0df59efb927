import type { V1ContainerState, V1PodCondition, V1PodStatus } from "@kubernetes/client-node";

/** What the stand-in kubelet knows about a pod's one container. */
export type ContainerRun =
  | { state: "starting" }
  | { state: "running"; startedAt: Date; ready: boolean }
  | { state: "backoff"; lastExit: Exit }
  | { state: "exited"; lastExit: Exit };

export interface Exit {
  code: number | null;
  signal: string | null;
  startedAt: Date;
  finishedAt: Date;
}

export interface PodRun {
  hostIP: string;
  podIP: string;
  startTime: Date;
  container: string;
  image: string;
  restartCount: number;
  run: ContainerRun;
  /** The pod's readiness gates (`spec.readinessGates[].conditionType`): Ready also waits for them. */
  readinessGates?: string[];
  /** The process id, shown as the container id so a person can find the sim. */
  pid?: number;
}

/**
 * The pod status a kubelet would report for `pod`: phase, the five standard conditions, IPs and
 * the container status. Condition transition times carry over from `previous` when unchanged, as
 * the real kubelet keeps them.
 */
export function podStatus(pod: PodRun, previous: V1PodStatus | undefined, now: Date): V1PodStatus {
  const ready = pod.run.state === "running" && pod.run.ready;
  const started = pod.run.state === "running";
  const gatesOpen = gatesTrue(pod.readinessGates, previous);
  const own = [
    condition("PodReadyToStartContainers", true),
    condition("Initialized", true),
    // As the kubelet does: Ready needs the containers ready and every readiness gate's condition True.
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
  const exit = pod.run.state === "backoff" || pod.run.state === "exited" ? pod.run.lastExit : undefined;
  const phase = pod.run.state === "exited" ? (exit?.code === 0 ? "Succeeded" : "Failed") : "Running";
  return {
    phase,
    conditions,
    hostIP: pod.hostIP,
    hostIPs: [{ ip: pod.hostIP }],
    podIP: pod.podIP,
    podIPs: [{ ip: pod.podIP }],
    startTime: pod.startTime,
    containerStatuses: [
      {
        name: pod.container,
        image: pod.image,
        imageID: "",
        containerID: pod.pid !== undefined ? `snooze-sim://${pod.pid}` : undefined,
        ready,
        started,
        restartCount: pod.restartCount,
        state: containerState(pod.run),
        lastState: exit && pod.run.state === "backoff" ? { terminated: terminated(exit) } : {},
      },
    ],
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

function containerState(run: ContainerRun): V1ContainerState {
  switch (run.state) {
    case "starting":
      return { waiting: { reason: "ContainerCreating" } };
    case "running":
      return { running: { startedAt: run.startedAt } };
    case "backoff":
      return { waiting: { reason: "CrashLoopBackOff", message: exitMessage(run.lastExit) } };
    case "exited":
      return { terminated: terminated(run.lastExit) };
  }
}

function terminated(exit: Exit) {
  return {
    exitCode: exit.code ?? 137,
    signal: undefined,
    reason: exit.code === 0 ? "Completed" : "Error",
    message: exitMessage(exit),
    startedAt: exit.startedAt,
    finishedAt: exit.finishedAt,
  };
}

function exitMessage(exit: Exit): string {
  return exit.signal ? `sim killed by ${exit.signal}` : `sim exited with code ${exit.code}`;
}
