import { describe, expect, test } from "vitest";
import { type KubeClient, KubeError } from "../../lib/kube/client.ts";
import type { Informer } from "../../lib/kube/informer.ts";
import type { KubeModel } from "../../lib/kube/model-config.ts";
import { deletionCostAnnotation, type Pod } from "../../lib/kube/pod-replica.ts";
import type { Replica } from "../platform.ts";
import { WriteConflict } from "../platform.ts";
import { KubePlatform, stoppingCost } from "./platform.ts";

/**
 * A Deployment's scale subresource and its pods with the apiserver's optimistic concurrency: a
 * write carrying an old resourceVersion gets 409. `between` runs after each read of the scale, as
 * the Deployment controller's status writes do.
 */
class FakeDeployment {
  replicas = 3;
  version = 10;
  replaced: number[] = [];
  costs = new Map<string, string>();
  between: () => void = () => {};
  client(): KubeClient {
    return {
      get: async (path: string) => {
        if (path.endsWith("/scale")) {
          const read = {
            metadata: { resourceVersion: String(this.version) },
            spec: { replicas: this.replicas },
          };
          this.between();
          return read;
        }
        const name = path.split("/").pop()!;
        return { metadata: { name, namespace: "ns", resourceVersion: "1" } };
      },
      patch: async (path: string, body: Pod) => {
        this.costs.set(path.split("/").pop()!, body.metadata.annotations![deletionCostAnnotation]!);
        return body;
      },
      replace: async (
        _path: string,
        body: { metadata: { resourceVersion: string }; spec: { replicas: number } },
      ) => {
        if (body.metadata.resourceVersion !== String(this.version))
          throw new KubeError(
            409,
            "Conflict",
            "the object has been modified; please apply your changes to the latest version",
          );
        this.version++;
        this.replicas = body.spec.replicas;
        this.replaced.push(body.spec.replicas);
        return body;
      },
    } as unknown as KubeClient;
  }
  /** The Deployment controller records the new status: the count stays, the version moves. */
  statusWrite(): void {
    this.version++;
  }
}

const model = {
  key: "ns/qwen",
  namespace: "ns",
  name: "qwen",
  spec: { port: 8000, workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" } },
} as unknown as KubeModel;

const replica = (id: string): Replica => ({
  id,
  label: `pod ${id}`,
  uid: id,
  up: true,
  createdAt: 0,
  restarts: 0,
  node: "n",
});

function platformOn(deployment: FakeDeployment): KubePlatform {
  const pods = { get: () => undefined, list: () => [] } as unknown as Informer<Pod>;
  const platform = new KubePlatform({
    client: deployment.client(),
    pods,
    workload: () => ({ replicas: deployment.replicas, selector: "app=qwen", scalable: true }),
  });
  platform.setModel(model);
  return platform;
}

describe("KubePlatform.scale", () => {
  test("a 409 from the Deployment controller's status write (the count unchanged) is read again and the scale goes through", async () => {
    const deployment = new FakeDeployment();
    let writes = 2;
    deployment.between = () => {
      if (writes-- > 0) deployment.statusWrite();
    };
    await platformOn(deployment).scale(model.key, 3, 2, [replica("qwen-a")]);
    expect(deployment.replaced).toEqual([2]);
    expect(deployment.costs.get("qwen-a")).toBe(String(stoppingCost));
  });

  test("a count changed by someone else is a WriteConflict, never overwritten", async () => {
    const deployment = new FakeDeployment();
    deployment.between = () => {
      deployment.statusWrite();
      deployment.replicas = 5;
    };
    await expect(platformOn(deployment).scale(model.key, 3, 2, [])).rejects.toThrow(
      new WriteConflict("Deployment qwen has 5 replicas, not 3"),
    );
    expect(deployment.replaced).toEqual([]);
  });

  test("a Deployment that never stops changing is given up after a few tries, as a WriteConflict", async () => {
    const deployment = new FakeDeployment();
    deployment.between = () => deployment.statusWrite();
    await expect(platformOn(deployment).scale(model.key, 3, 2, [])).rejects.toThrow(
      /kept changing while scaling/,
    );
    expect(deployment.replicas).toBe(3);
  });
});

describe("KubePlatform.replicaSet: a pod that cannot come up as it is", () => {
  type Status = NonNullable<Pod["status"]>;
  const pod = (name: string, status: Status, containers = ["vllm"]): Pod => ({
    metadata: {
      name,
      namespace: "ns",
      uid: `uid-${name}`,
      labels: { app: "qwen" },
      creationTimestamp: "2026-01-01T00:00:00Z",
    },
    spec: { nodeName: "gpu-1", containers: containers.map((c) => ({ name: c })) },
    status,
  });
  const notReady = [
    { type: "PodScheduled", status: "True" },
    { type: "ContainersReady", status: "False" },
    { type: "Ready", status: "False" },
  ];
  const waiting = (reason: string, message?: string, extra: object = {}): Status => ({
    phase: "Pending",
    conditions: notReady,
    containerStatuses: [
      {
        name: "vllm",
        restartCount: 0,
        state: { waiting: { reason, ...(message ? { message } : {}) } },
        ...extra,
      },
    ],
  });
  const replicasOf = (...list: Pod[]) => {
    const deployment = new FakeDeployment();
    const platform = new KubePlatform({
      client: deployment.client(),
      pods: { get: () => undefined, list: () => list } as unknown as Informer<Pod>,
      workload: () => ({ replicas: list.length, selector: "app=qwen", scalable: true }),
    });
    platform.setModel(model);
    return platform.replicaSet(model.key)!.replicas;
  };
  const failing = (status: Status, containers?: string[]) =>
    replicasOf(pod("qwen-a", status, containers))[0]!.failing;
  const crashed = (status: Status) => replicasOf(pod("qwen-a", status))[0]!.crashed;

  test.each([
    [
      "ErrImagePull",
      'failed to pull and unpack image "registry.invalid/vllm:1": dial tcp: lookup registry.invalid: no such host',
    ],
    ["ImagePullBackOff", 'Back-off pulling image "registry.invalid/vllm:1"'],
    ["InvalidImageName", 'Failed to apply default image tag "vllm/VLLM": couldn\'t parse image name'],
    ["ErrImageNeverPull", 'Container image "vllm:dev" is not present with pull policy of Never'],
    ["CreateContainerConfigError", 'secret "hf-token" not found'],
    ["CreateContainerError", "context deadline exceeded"],
    ["RunContainerError", 'exec: "vllm": executable file not found in $PATH'],
  ])("%s: failing, with the kubelet's message; not a crash", (reason, message) => {
    expect(failing(waiting(reason, message))).toBe(`engine container "vllm": ${reason}: ${message}`);
    expect(crashed(waiting(reason, message))).toBeUndefined();
  });

  test("a crash loop: the kubelet's message and the last termination's exit code, reason and message", () => {
    const [replica] = replicasOf(
      pod(
        "qwen-a",
        waiting(
          "CrashLoopBackOff",
          "back-off 20s restarting failed container=vllm pod=qwen-a_ns(uid-qwen-a)",
          {
            restartCount: 2,
            lastState: {
              terminated: { exitCode: 1, reason: "Error", message: "ValueError: unknown model qwen-7b\n" },
            },
          },
        ),
      ),
    );
    expect(replica!.failing).toBe(
      `engine container "vllm": CrashLoopBackOff: back-off 20s restarting failed container=vllm pod=qwen-a_ns(uid-qwen-a); ` +
        "last exited with code 1 (Error): ValueError: unknown model qwen-7b",
    );
    expect(replica!.restarts).toBe(2);
    expect(replica!.up).toBe(false);
    expect(replica!.crashed).toBe(true);
  });

  test("an engine container that terminated during its start (not Ready): failing, with its exit", () => {
    expect(
      failing({
        phase: "Running",
        conditions: notReady,
        containerStatuses: [
          { name: "vllm", restartCount: 0, state: { terminated: { exitCode: 137, reason: "OOMKilled" } } },
        ],
      }),
    ).toBe('the engine container "vllm" exited with code 137 (OOMKilled) during its start');
    expect(
      crashed({
        phase: "Running",
        conditions: notReady,
        containerStatuses: [{ name: "vllm", state: { terminated: { exitCode: 1 } } }],
      }),
    ).toBe(true);
  });

  test("the engine container is found by name: the kubelet sorts statuses, a sidecar may come first", () => {
    const status: Status = {
      phase: "Pending",
      conditions: notReady,
      containerStatuses: [
        { name: "queue-proxy", restartCount: 0, state: { running: {} } },
        {
          name: "user-container",
          restartCount: 4,
          state: { waiting: { reason: "ImagePullBackOff", message: 'Back-off pulling image "x.invalid/m"' } },
        },
      ],
    };
    const [replica] = replicasOf(pod("qwen-a", status, ["user-container", "queue-proxy"]));
    expect(replica!.failing).toBe(
      'engine container "user-container": ImagePullBackOff: Back-off pulling image "x.invalid/m"',
    );
    expect(replica!.restarts).toBe(4);
  });

  test("a pod of an engine and sidecars names the engine container too, not only a sidecar", () => {
    // Found by an outside tester: `cannot start: ImagePullBackOff: …` named no container, while a
    // sidecar's reason did (`container "auth-proxy": …`), so with several containers it read as
    // any of them.
    const status: Status = {
      phase: "Pending",
      conditions: notReady,
      initContainerStatuses: [{ name: "fetch-weights", state: { terminated: { exitCode: 0 } } }],
      containerStatuses: [
        { name: "auth-proxy", restartCount: 0, state: { running: {} } },
        { name: "queue-proxy", restartCount: 0, state: { running: {} } },
        {
          name: "vllm",
          restartCount: 0,
          state: { waiting: { reason: "ErrImagePull", message: 'failed to pull "registry.invalid/vllm:1"' } },
        },
      ],
    };
    const containers = ["vllm", "auth-proxy", "queue-proxy"];
    expect(failing(status, containers)).toBe(
      'engine container "vllm": ErrImagePull: failed to pull "registry.invalid/vllm:1"',
    );
    // An engine that exited during its start is named too.
    const exited: Status = {
      ...status,
      containerStatuses: [
        ...status.containerStatuses!.slice(0, 2),
        { name: "vllm", restartCount: 0, state: { terminated: { exitCode: 2, reason: "Error" } } },
      ],
    };
    expect(failing(exited, containers)).toBe(
      'the engine container "vllm" exited with code 2 (Error) during its start',
    );
  });

  test("a Knative revision's workload: its pods kept after a failed start, until startTimeout or its progress deadline", () => {
    const view = (workload: object) => {
      const platform = new KubePlatform({
        client: new FakeDeployment().client(),
        pods: { get: () => undefined, list: () => [] } as unknown as Informer<Pod>,
        workload: () => ({ replicas: 1, selector: "app=qwen", scalable: true, ...workload }),
      });
      platform.setModel(model);
      const { keepFailedStarts, progressDeadline } = platform.replicaSet(model.key)!;
      return { keepFailedStarts, progressDeadline };
    };
    expect(view({ keepFailedStarts: true, progressDeadline: 5_000 })).toEqual({
      keepFailedStarts: true,
      progressDeadline: 5_000,
    });
    expect(view({})).toEqual({ keepFailedStarts: undefined, progressDeadline: undefined });
  });

  test("a very long reason is cut in the middle", () => {
    const reason = failing(waiting("CreateContainerError", `${"a".repeat(3_000)}END`))!;
    expect(reason.length).toBeLessThanOrEqual(2_000);
    expect(reason.startsWith('engine container "vllm": CreateContainerError: aaa')).toBe(true);
    expect(reason.endsWith("aaEND")).toBe(true);
  });

  test("still able to come up: creating, initializing, a pull under way, unschedulable, loading after a restart, Ready", () => {
    const cases: Status[] = [
      waiting("ContainerCreating"),
      waiting("PodInitializing"),
      // A pull, however slow, shows as ContainerCreating; the kubelet's event says "Pulling".
      waiting("ContainerCreating", "Pulling image vllm/vllm-openai:v0.11.0"),
      // Unschedulable: no container status at all (a cluster autoscaler may add a node).
      {
        phase: "Pending",
        conditions: [{ type: "PodScheduled", status: "False" }],
      },
      // Restarted once and loading again: running, the last exit behind it.
      {
        phase: "Running",
        conditions: notReady,
        containerStatuses: [
          {
            name: "vllm",
            restartCount: 1,
            state: { running: { startedAt: "2026-01-01T00:01:00Z" } },
            lastState: { terminated: { exitCode: 1, reason: "Error" } },
          },
        ],
      },
      // Up: whatever a status says besides, it is not failing.
      {
        phase: "Running",
        conditions: [
          { type: "ContainersReady", status: "True" },
          { type: "Ready", status: "True" },
        ],
        containerStatuses: [{ name: "vllm", restartCount: 0, state: { terminated: { exitCode: 1 } } }],
      },
    ];
    for (const status of cases) expect(failing(status)).toBeUndefined();
    // A sidecar's or an init container's crash loop may end on a later try (an init container
    // waiting for a download the engine needs): left to startTimeout.
    expect(
      failing(
        {
          phase: "Pending",
          conditions: notReady,
          initContainerStatuses: [
            {
              name: "fetch-weights",
              restartCount: 3,
              state: { waiting: { reason: "CrashLoopBackOff", message: "back-off 40s" } },
            },
          ],
          containerStatuses: [{ name: "vllm", state: { waiting: { reason: "PodInitializing" } } }],
        },
        ["vllm"],
      ),
    ).toBeUndefined();
  });

  test("a sidecar or an init container that cannot run keeps the pod from ever being Ready: failing, named", () => {
    const sidecar: Status = {
      phase: "Pending",
      conditions: notReady,
      containerStatuses: [
        { name: "vllm", state: { running: {} } },
        {
          name: "auth-proxy",
          state: { waiting: { reason: "ImagePullBackOff", message: 'Back-off pulling image "x.invalid/p"' } },
        },
      ],
    };
    expect(failing(sidecar, ["vllm", "auth-proxy"])).toBe(
      'container "auth-proxy": ImagePullBackOff: Back-off pulling image "x.invalid/p"',
    );
    const init: Status = {
      phase: "Pending",
      conditions: notReady,
      initContainerStatuses: [
        {
          name: "fetch-weights",
          state: {
            waiting: { reason: "CreateContainerConfigError", message: 'secret "hf-token" not found' },
          },
        },
      ],
      containerStatuses: [{ name: "vllm", state: { waiting: { reason: "PodInitializing" } } }],
    };
    expect(failing(init)).toBe(
      'init container "fetch-weights": CreateContainerConfigError: secret "hf-token" not found',
    );
    // Not the engine's own exit: in a slot it fails at once too (it is no other member's doing).
    expect(crashed(init)).toBeUndefined();
  });
});
