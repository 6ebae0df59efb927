import type { V1Pod } from "@kubernetes/client-node";
import { describe, expect, test } from "vitest";
import { simLaunch } from "./sim-launch.ts";

const pod = (container: Record<string, unknown>): V1Pod =>
  ({ spec: { containers: [{ name: "engine", image: "vllm/vllm-openai", ...container }] } }) as V1Pod;

describe("simLaunch", () => {
  test("passes vLLM args to the sim, drops the serve subcommand and the image entrypoint", () => {
    const launch = simLaunch(
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
    expect(launch.args).toEqual([
      "Qwen/Qwen3-0.6B",
      "--served-model-name",
      "qwen",
      "--enable-sleep-mode",
      "--port",
      "9000",
    ]);
    expect(launch.port).toBe(9000);
    expect(launch.env).toEqual({ VLLM_SERVER_DEV_MODE: "1" });
    expect(launch.readiness).toEqual({
      path: "/health",
      port: 9000,
      periodMs: 1_000,
      initialDelayMs: 0,
      failureThreshold: 3,
    });
  });

  test("takes the port from the first containerPort and replaces --host with the pod's own", () => {
    const launch = simLaunch(
      pod({ args: ["--host=0.0.0.0", "--model", "m"], ports: [{ containerPort: 8123 }] }),
    );
    expect(launch.args).toEqual(["--model", "m", "--port", "8123"]);
    expect(launch.port).toBe(8123);
  });

  test("follows an httpGet readiness probe, also by port name", () => {
    const launch = simLaunch(
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
    expect(() => simLaunch(pod({ readinessProbe: { exec: { command: ["true"] } } }))).toThrow(/httpGet/);
    expect(() => simLaunch({ spec: { containers: [] } } as V1Pod)).toThrow(/no containers/);
  });
});
