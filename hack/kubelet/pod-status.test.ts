import { describe, expect, test } from "vitest";
import { type ContainerReport, type PodRun, podStatus } from "./pod-status.ts";

const t0 = new Date("2026-01-01T00:00:00Z");
const t1 = new Date("2026-01-01T00:00:05Z");
const engine: ContainerReport = {
  name: "engine",
  image: "sim",
  restartCount: 0,
  run: { state: "running", startedAt: t0, ready: false },
  pid: 42,
};
const base: PodRun = { hostIP: "10.213.1.1", podIP: "10.213.1.2", startTime: t0, containers: [engine] };
const one = (container: Partial<ContainerReport>): PodRun => ({
  ...base,
  containers: [{ ...engine, ...container }],
});

const conditionOf = (status: ReturnType<typeof podStatus>, type: string) =>
  status.conditions?.find((c) => c.type === type);

describe("podStatus", () => {
  test("a running, not yet ready sim: Running, Ready=False, IPs set", () => {
    const status = podStatus(base, undefined, t0);
    expect(status.phase).toBe("Running");
    expect(status.podIP).toBe("10.213.1.2");
    expect(status.podIPs).toEqual([{ ip: "10.213.1.2" }]);
    expect(conditionOf(status, "Ready")?.status).toBe("False");
    expect(status.containerStatuses?.[0]).toMatchObject({
      ready: false,
      started: true,
      containerID: "snooze-sim://42",
    });
  });

  test("ready flips Ready and ContainersReady and moves only their transition time", () => {
    const before = podStatus(base, undefined, t0);
    const after = podStatus(one({ run: { state: "running", startedAt: t0, ready: true } }), before, t1);
    expect(conditionOf(after, "Ready")).toMatchObject({ status: "True", lastTransitionTime: t1 });
    expect(conditionOf(after, "ContainersReady")).toMatchObject({ status: "True", lastTransitionTime: t1 });
    expect(conditionOf(after, "PodScheduled")).toMatchObject({ status: "True", lastTransitionTime: t0 });
  });

  test("a crashed sim waiting to restart shows CrashLoopBackOff and its last exit", () => {
    const exit = { code: 2, signal: null, startedAt: t0, finishedAt: t1 };
    const status = podStatus(
      one({ restartCount: 1, run: { state: "backoff", lastExit: exit } }),
      undefined,
      t1,
    );
    expect(status.phase).toBe("Running");
    expect(status.containerStatuses?.[0]?.state?.waiting?.reason).toBe("CrashLoopBackOff");
    expect(status.containerStatuses?.[0]?.lastState?.terminated?.exitCode).toBe(2);
    expect(conditionOf(status, "Ready")?.status).toBe("False");
  });

  test("a crash loop in the kubelet's words: the back-off and the pod in the message, the exit and its log's tail in lastState", () => {
    const exit = {
      code: 2,
      signal: null,
      startedAt: t0,
      finishedAt: t1,
      message: "error: unknown flag --nope",
    };
    const status = podStatus(
      {
        ...one({ restartCount: 1, run: { state: "backoff", lastExit: exit, delayMs: 2_000 } }),
        ref: { name: "qwen-abc", namespace: "team", uid: "u-1" },
      },
      undefined,
      t1,
    );
    expect(status.containerStatuses?.[0]).toMatchObject({
      restartCount: 1,
      state: {
        waiting: {
          reason: "CrashLoopBackOff",
          message: "back-off 2s restarting failed container=engine pod=qwen-abc_team(u-1)",
        },
      },
      lastState: { terminated: { exitCode: 2, reason: "Error", message: "error: unknown flag --nope" } },
    });
    // Killed by a signal: 128 + its number; no termination message unless the policy took one.
    const killed = podStatus(
      one({
        run: { state: "backoff", lastExit: { code: null, signal: "SIGTERM", startedAt: t0, finishedAt: t1 } },
      }),
      undefined,
      t1,
    );
    expect(killed.containerStatuses?.[0]?.lastState?.terminated).toMatchObject({ exitCode: 143 });
    expect(killed.containerStatuses?.[0]?.lastState?.terminated?.message).toBeUndefined();
  });

  test("an image that cannot be pulled: ErrImagePull with the runtime's words, then ImagePullBackOff as the kubelet says it", () => {
    const image = "registry.invalid/vllm:1";
    const why = "dial tcp: lookup registry.invalid: no such host";
    const pulling = (backoff: boolean) =>
      podStatus(one({ image, run: { state: "pull-failed", message: why, backoff } }), undefined, t1);
    const tried = pulling(false);
    expect(tried.containerStatuses?.[0]).toMatchObject({
      ready: false,
      started: false,
      restartCount: 0,
      state: { waiting: { reason: "ErrImagePull", message: why } },
    });
    expect(conditionOf(tried, "Ready")?.status).toBe("False");
    expect(pulling(true).containerStatuses?.[0]?.state?.waiting).toEqual({
      reason: "ImagePullBackOff",
      message: `Back-off pulling image "${image}": ErrImagePull: ${why}`,
    });
  });

  test("readiness gates: Ready waits for every gate's condition, ContainersReady does not", () => {
    const running = one({ run: { state: "running", startedAt: t0, ready: true } });
    const gated = { ...running, readinessGates: ["snooze.dev/awake"] };
    const closed = podStatus(gated, undefined, t0);
    expect(conditionOf(closed, "ContainersReady")?.status).toBe("True");
    expect(conditionOf(closed, "Ready")?.status).toBe("False");
    const awake = {
      ...closed,
      conditions: [...(closed.conditions ?? []), { type: "snooze.dev/awake", status: "True" }],
    };
    expect(conditionOf(podStatus(gated, awake, t1), "Ready")?.status).toBe("True");
    // The gate's condition is the autoscaler's: the kubelet's status does not carry (or reset) it.
    expect(conditionOf(podStatus(gated, awake, t1), "snooze.dev/awake")).toBeUndefined();
  });

  test("several containers: Ready only when all are; a container that cannot run says why", () => {
    const ready = { ...engine, run: { state: "running" as const, startedAt: t0, ready: true } };
    const queue: ContainerReport = {
      name: "queue-proxy",
      image: "ko://knative.dev/serving/cmd/queue",
      restartCount: 0,
      run: { state: "running", startedAt: t0, ready: false },
    };
    const pod = (second: ContainerReport) => ({ ...base, containers: [ready, second] });
    const notYet = podStatus(pod(queue), undefined, t0);
    expect(conditionOf(notYet, "Ready")?.status).toBe("False");
    expect(notYet.containerStatuses?.map((c) => [c.name, c.ready])).toEqual([
      ["engine", true],
      ["queue-proxy", false],
    ]);
    const both = podStatus(
      pod({ ...queue, run: { state: "running", startedAt: t0, ready: true } }),
      notYet,
      t1,
    );
    expect(conditionOf(both, "Ready")?.status).toBe("True");
    const unrunnable = podStatus(
      pod({ ...queue, run: { state: "unrunnable", reason: "ErrImageNeverPull", message: "not mapped" } }),
      undefined,
      t0,
    );
    expect(unrunnable.phase).toBe("Running");
    expect(conditionOf(unrunnable, "Ready")?.status).toBe("False");
    expect(unrunnable.containerStatuses?.[1]?.state?.waiting).toEqual({
      reason: "ErrImageNeverPull",
      message: "not mapped",
    });
  });

  test("phase: Succeeded or Failed only once every container has exited for good", () => {
    const exit = (code: number) => ({ code, signal: null, startedAt: t0, finishedAt: t1 });
    const exited = (code: number): ContainerReport => ({
      ...engine,
      run: { state: "exited", lastExit: exit(code) },
    });
    expect(podStatus({ ...base, containers: [exited(0), exited(0)] }, undefined, t1).phase).toBe("Succeeded");
    expect(podStatus({ ...base, containers: [exited(0), exited(1)] }, undefined, t1).phase).toBe("Failed");
    expect(podStatus({ ...base, containers: [exited(0), engine] }, undefined, t1).phase).toBe("Running");
  });
});
