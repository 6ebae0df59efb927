import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, test } from "vitest";
import { containerLaunches, registryHost } from "./container-launch.ts";

const placement = { podIP: "10.213.1.2", hostIP: "10.213.1.1", nodeName: "snooze-stand-in" };
const pod = (container: Record<string, unknown>, ...sidecars: Record<string, unknown>[]): V1Pod =>
  ({
    metadata: { name: "qwen-abc", namespace: "team", uid: "u-1" },
    spec: {
      containers: [{ name: "engine", image: "vllm/vllm-openai", ...container }, ...sidecars],
    },
  }) as unknown as V1Pod;
const first = (p: V1Pod, images?: Map<string, string>) => containerLaunches(p, placement, images)[0]!;

describe("containerLaunches: the first container runs as snooze sim", () => {
  test("passes vLLM args to the sim, drops the serve subcommand and the image entrypoint", () => {
    const launch = first(
      pod({
        command: ["vllm"],
        args: [
          "serve",
          "Qwen/Qwen3-0.6B",
          "--served-model-name",
          "qwen",
          "--enable-sleep-mode",
          "--port",
          "9000",
        ],
        env: [
          { name: "VLLM_SERVER_DEV_MODE", value: "1" },
          { name: "SECRET", valueFrom: { secretKeyRef: {} } },
        ],
      }),
    );
    expect(launch.program).toEqual({
      kind: "sim",
      args: ["Qwen/Qwen3-0.6B", "--served-model-name", "qwen", "--enable-sleep-mode", "--port", "9000"],
    });
    expect(launch.env).toEqual({ VLLM_SERVER_DEV_MODE: "1" });
    expect(launch.readiness).toEqual({
      path: "/health",
      scheme: "HTTP",
      port: 9000,
      headers: {},
      periodMs: 1_000,
      initialDelayMs: 0,
      failureThreshold: 3,
    });
  });

  test("takes the port from the first containerPort and replaces --host with the pod's own", () => {
    const launch = first(pod({ args: ["--host=0.0.0.0", "--model", "m"], ports: [{ containerPort: 8123 }] }));
    expect(launch.program).toEqual({ kind: "sim", args: ["--model", "m", "--port", "8123"] });
    expect(launch.readiness?.port).toBe(8123);
  });

  test("follows an httpGet readiness probe, also by port name", () => {
    const launch = first(
      pod({
        ports: [{ name: "http", containerPort: 8000 }],
        readinessProbe: {
          httpGet: { path: "/v1/models", port: "http" },
          periodSeconds: 2,
          failureThreshold: 1,
        },
      }),
    );
    expect(launch.readiness).toMatchObject({
      path: "/v1/models",
      port: 8000,
      periodMs: 2_000,
      failureThreshold: 1,
    });
  });

  test("refuses what it cannot do: exec probes, pods without containers", () => {
    expect(() => first(pod({ readinessProbe: { exec: { command: ["true"] } } }))).toThrow(/httpGet/);
    expect(() => containerLaunches({ spec: { containers: [] } } as V1Pod, placement)).toThrow(
      /no containers/,
    );
  });

  test("fills the downward API fields a kubelet knows into the env", () => {
    const field = (name: string, fieldPath: string) => ({ name, valueFrom: { fieldRef: { fieldPath } } });
    const launch = first(
      pod({
        env: [
          field("POD", "metadata.name"),
          field("NS", "metadata.namespace"),
          field("UID", "metadata.uid"),
          field("NODE", "spec.nodeName"),
          field("SA", "spec.serviceAccountName"),
          field("IP", "status.podIP"),
          field("HOST", "status.hostIP"),
          field("LABELS", "metadata.labels"),
          // Stored without `value` when it was "": Knative's queue-proxy requires some to be set.
          { name: "EMPTY" },
        ],
      }),
    );
    expect(launch.env).toEqual({
      POD: "qwen-abc",
      NS: "team",
      UID: "u-1",
      NODE: "snooze-stand-in",
      SA: "default",
      IP: "10.213.1.2",
      HOST: "10.213.1.1",
      EMPTY: "",
    });
  });
});

describe("containerLaunches: a sidecar runs the binary its image is mapped to", () => {
  // What Knative's revision reconciler puts next to the user container (abridged).
  const queueProxy = {
    name: "queue-proxy",
    image: "ko://knative.dev/serving/cmd/queue",
    ports: [
      { name: "http-queueadm", containerPort: 8022 },
      { name: "http1", containerPort: 8012 },
    ],
    readinessProbe: {
      httpGet: { port: 8012, httpHeaders: [{ name: "K-Network-Probe", value: "queue" }] },
      periodSeconds: 1,
    },
    env: [
      { name: "USER_PORT", value: "8080" },
      { name: "SERVING_POD_IP", valueFrom: { fieldRef: { fieldPath: "status.podIP" } } },
    ],
  };
  const images = new Map([["ko://knative.dev/serving/cmd/queue", "/cache/knative/queue"]]);

  test("mapped: its binary with its env, probed with the probe's headers on the path /", () => {
    const [user, queue] = containerLaunches(
      pod({ ports: [{ containerPort: 8080 }] }, queueProxy),
      placement,
      images,
    );
    expect(user?.program.kind).toBe("sim");
    expect(queue).toEqual({
      name: "queue-proxy",
      image: "ko://knative.dev/serving/cmd/queue",
      program: { kind: "binary", path: "/cache/knative/queue", args: [] },
      env: { USER_PORT: "8080", SERVING_POD_IP: "10.213.1.2" },
      readiness: {
        path: "/",
        scheme: "HTTP",
        port: 8012,
        headers: { "K-Network-Probe": "queue" },
        periodMs: 1_000,
        initialDelayMs: 0,
        failureThreshold: 3,
      },
    });
  });

  test("without a readiness probe: no check (ready once running)", () => {
    const { readinessProbe: _, ...unprobed } = queueProxy;
    expect(containerLaunches(pod({}, unprobed), placement, images)[1]?.readiness).toBeUndefined();
  });

  test("not mapped, or with a command replacing the entrypoint: unrunnable, saying why", () => {
    const [, unmapped] = containerLaunches(pod({}, queueProxy), placement);
    expect(unmapped?.program).toMatchObject({ kind: "unrunnable", reason: "ErrImageNeverPull" });
    expect(unmapped?.program.kind === "unrunnable" && unmapped.program.message).toContain(
      "--run-image ko://knative.dev/serving/cmd/queue=<path>",
    );
    const [, commanded] = containerLaunches(
      pod({}, { ...queueProxy, command: ["/bin/sh"] }),
      placement,
      images,
    );
    expect(commanded?.program).toMatchObject({ kind: "unrunnable", reason: "CreateContainerError" });
  });
});

describe("containerLaunches: a first container whose image is mapped runs that binary, not a sim", () => {
  test("Knative Eventing's PingSource adapter: its binary, its env, probed on the named port after the delay", () => {
    // The adapter's container as config/core's Deployment has it (abridged).
    const adapter = {
      name: "dispatcher",
      image: "ko://knative.dev/eventing/cmd/mtping",
      env: [
        { name: "SYSTEM_NAMESPACE", value: "", valueFrom: { fieldRef: { fieldPath: "metadata.namespace" } } },
        { name: "K_SINK_TIMEOUT", value: "-1" },
      ],
      ports: [
        { name: "metrics", containerPort: 9090 },
        { name: "probes", containerPort: 8080 },
      ],
      readinessProbe: {
        httpGet: { path: "/readiness", port: "probes" },
        initialDelaySeconds: 20,
        periodSeconds: 10,
      },
    };
    const launch = first(pod(adapter), new Map([[adapter.image, "/cache/knative-eventing/mtping"]]));
    expect(launch.program).toEqual({ kind: "binary", path: "/cache/knative-eventing/mtping", args: [] });
    expect(launch.env).toEqual({ SYSTEM_NAMESPACE: "team", K_SINK_TIMEOUT: "-1" });
    expect(launch.readiness).toMatchObject({
      path: "/readiness",
      port: 8080,
      initialDelayMs: 20_000,
      periodMs: 10_000,
    });
    // Unmapped, the same container is a model server as before.
    expect(first(pod(adapter)).program.kind).toBe("sim");
  });

  test("a probe's scheme HTTPS is kept (Knative's in-memory channel controller serves its webhook only over TLS)", () => {
    const controller = {
      name: "controller",
      image: "ko://knative.dev/eventing/cmd/in_memory/channel_controller",
      readinessProbe: {
        periodSeconds: 1,
        httpGet: {
          scheme: "HTTPS",
          port: 8443,
          httpHeaders: [{ name: "k-kubelet-probe", value: "webhook" }],
        },
      },
    };
    const launch = first(
      pod(controller),
      new Map([[controller.image, "/cache/knative-eventing/imc-controller"]]),
    );
    expect(launch.readiness).toMatchObject({
      scheme: "HTTPS",
      port: 8443,
      path: "/",
      headers: { "k-kubelet-probe": "webhook" },
    });
  });
});

describe("containerLaunches: env from a Secret", () => {
  test("an entry naming a Secret's key is left for the kubelet to read when it starts the container", () => {
    const launch = first(
      pod({
        env: [
          { name: "VLLM_SERVER_DEV_MODE", value: "1" },
          { name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf", key: "token" } } },
          { name: "EXTRA", valueFrom: { secretKeyRef: { name: "extra", key: "k", optional: true } } },
          // Without a name there is no Secret to read: left out, as before.
          { name: "NONE", valueFrom: { secretKeyRef: {} } },
        ],
      }),
    );
    expect(launch.env).toEqual({ VLLM_SERVER_DEV_MODE: "1" });
    expect(launch.secretEnv).toEqual([
      { env: "HF_TOKEN", secret: "hf", key: "token", optional: false },
      { env: "EXTRA", secret: "extra", key: "k", optional: true },
    ]);
    expect(first(pod({})).secretEnv).toBeUndefined();
  });
});

describe("containerLaunches: an image no registry can serve", () => {
  test("a registry host under the reserved .invalid TLD cannot be pulled, first container or sidecar", () => {
    const launches = containerLaunches(
      pod(
        { image: "registry.invalid/vllm/vllm-openai:v0.11.0" },
        { name: "side", image: "Cache.Invalid:5000/x" },
      ),
      placement,
    );
    expect(launches.map((l) => [l.name, l.program.kind])).toEqual([
      ["engine", "unpullable"],
      ["side", "unpullable"],
    ]);
    expect(launches[0]!.program).toEqual({
      kind: "unpullable",
      message:
        'failed to pull and unpack image "registry.invalid/vllm/vllm-openai:v0.11.0": failed to resolve reference ' +
        '"registry.invalid/vllm/vllm-openai:v0.11.0": failed to do request: Head "https://registry.invalid/v2/...": ' +
        "dial tcp: lookup registry.invalid: no such host",
    });
  });

  test("any other image runs as before: the first container as snooze sim", () => {
    for (const image of [
      "vllm/vllm-openai",
      "invalid/vllm",
      "registry.example.com/invalid:1",
      "localhost:5000/x",
    ])
      expect(first(pod({ image })).program.kind).toBe("sim");
  });

  test("registryHost follows Docker's reference grammar", () => {
    expect(registryHost("vllm/vllm-openai:v1")).toBeUndefined();
    expect(registryHost("ubuntu")).toBeUndefined();
    expect(registryHost("localhost/x")).toBe("localhost");
    expect(registryHost("Registry.Invalid:5000/a/b@sha256:00")).toBe("registry.invalid");
  });

  test("terminationMessagePolicy FallbackToLogsOnError is carried to the first container's launch", () => {
    expect(first(pod({ terminationMessagePolicy: "FallbackToLogsOnError" })).logsOnError).toBe(true);
    expect(first(pod({})).logsOnError).toBeUndefined();
  });
});
