import { describe, expect, test } from "vitest";
import { applyPatch } from "./patch-builder.ts";
import { isVllmContainer, mutatePod } from "./pod-sleep-mode.ts";

const pod = (containers: Record<string, unknown>[], annotations: Record<string, string> = {}) => ({
  metadata: { annotations: { "snooze.dev/slot": "gpu-0", ...annotations } },
  spec: { containers },
});

describe("mutatePod", () => {
  test.each([
    {
      name: "vLLM image without the flag and env",
      containers: [{ name: "vllm", image: "vllm/vllm-openai:v0.11.0", args: ["--model", "qwen"] }],
      device: "3",
      expected: [
        {
          name: "vllm",
          image: "vllm/vllm-openai:v0.11.0",
          args: ["--model", "qwen", "--enable-sleep-mode"],
          env: [
            { name: "VLLM_SERVER_DEV_MODE", value: "1" },
            { name: "NVIDIA_VISIBLE_DEVICES", value: "3" },
          ],
        },
      ],
      warnings: 0,
    },
    {
      name: "command vllm serve, no args, existing env kept",
      containers: [
        { name: "e", image: "x", command: ["vllm", "serve", "m"], env: [{ name: "A", value: "b" }] },
      ],
      device: undefined,
      expected: [
        {
          name: "e",
          image: "x",
          command: ["vllm", "serve", "m"],
          args: ["--enable-sleep-mode"],
          env: [
            { name: "A", value: "b" },
            { name: "VLLM_SERVER_DEV_MODE", value: "1" },
          ],
        },
      ],
      warnings: 0,
    },
    {
      name: "flag already there, dev mode 0 set to 1",
      containers: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "0" }],
        },
      ],
      device: undefined,
      expected: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      warnings: 0,
    },
    {
      // vLLM turns underscores into dashes and takes argparse's abbreviations: no second flag.
      name: "flag written with underscores, or shortened as vLLM takes it: not added again",
      containers: [
        {
          name: "a",
          image: "vllm",
          args: ["--enable_sleep_mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
        {
          name: "b",
          image: "vllm",
          args: ["--enable-sleep"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      device: undefined,
      expected: [
        {
          name: "a",
          image: "vllm",
          args: ["--enable_sleep_mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
        {
          name: "b",
          image: "vllm",
          args: ["--enable-sleep"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      warnings: 0,
    },
    {
      name: "one sidecar and one engine: only the engine",
      containers: [
        { name: "proxy", image: "envoy" },
        { name: "engine", image: "my/vllm-build" },
      ],
      device: undefined,
      expected: [
        { name: "proxy", image: "envoy" },
        {
          name: "engine",
          image: "my/vllm-build",
          args: ["--enable-sleep-mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      warnings: 0,
    },
    {
      name: "a single unnamed container is the engine",
      containers: [{ name: "engine", image: "registry/model-server" }],
      device: undefined,
      expected: [
        {
          name: "engine",
          image: "registry/model-server",
          args: ["--enable-sleep-mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      warnings: 0,
    },
    {
      name: "two containers, neither vLLM: nothing, a warning",
      containers: [
        { name: "a", image: "x" },
        { name: "b", image: "y" },
      ],
      device: "0",
      expected: [
        { name: "a", image: "x" },
        { name: "b", image: "y" },
      ],
      warnings: 1,
    },
    {
      name: "shell command: env set, flag not, a warning",
      containers: [{ name: "e", image: "vllm", command: ["sh", "-c", "vllm serve m"] }],
      device: undefined,
      expected: [
        {
          name: "e",
          image: "vllm",
          command: ["sh", "-c", "vllm serve m"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      warnings: 1,
    },
    {
      // Kubernetes lets a name repeat in env (with a warning) and the container gets the last one:
      // setting only the first left sleep mode off and the pod on every GPU.
      name: "a name written twice: every entry of it is set, the last one being what the engine gets",
      containers: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode"],
          env: [
            { name: "VLLM_SERVER_DEV_MODE", value: "0" },
            { name: "NVIDIA_VISIBLE_DEVICES", value: "1" },
            { name: "A", value: "b" },
            { name: "VLLM_SERVER_DEV_MODE", value: "0" },
            { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
          ],
        },
      ],
      device: "3",
      expected: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode"],
          env: [
            { name: "VLLM_SERVER_DEV_MODE", value: "1" },
            { name: "NVIDIA_VISIBLE_DEVICES", value: "3" },
            { name: "A", value: "b" },
            { name: "VLLM_SERVER_DEV_MODE", value: "1" },
            { name: "NVIDIA_VISIBLE_DEVICES", value: "3" },
          ],
        },
      ],
      warnings: 1,
    },
    {
      // The apiserver never sends these, a client may: the flag's patch must still apply.
      name: "args null or not a list: taken as absent, so the patch applies",
      containers: [
        { name: "e", image: "vllm", args: null },
        { name: "f", image: "vllm", command: ["vllm", "serve"], args: "--model m" },
      ],
      device: undefined,
      expected: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
        {
          name: "f",
          image: "vllm",
          command: ["vllm", "serve"],
          args: ["--enable-sleep-mode"],
          env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }],
        },
      ],
      warnings: 0,
    },
    {
      name: "another device is replaced, with a warning; a GPU request is warned about",
      containers: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode=true"],
          env: [{ name: "NVIDIA_VISIBLE_DEVICES", value: "all" }],
          resources: { limits: { "nvidia.com/gpu": 1 } },
        },
      ],
      device: "GPU-1234",
      expected: [
        {
          name: "e",
          image: "vllm",
          args: ["--enable-sleep-mode=true"],
          env: [
            { name: "NVIDIA_VISIBLE_DEVICES", value: "GPU-1234" },
            { name: "VLLM_SERVER_DEV_MODE", value: "1" },
          ],
          resources: { limits: { "nvidia.com/gpu": 1 } },
        },
      ],
      warnings: 2,
    },
  ])("$name", ({ containers, device, expected, warnings }) => {
    const input = pod(containers);
    const first = mutatePod(input, { slot: "gpu-0", device });
    const result = applyPatch(input, first.patch);
    expect(result.spec.containers).toEqual(expected);
    expect(first.warnings).toHaveLength(warnings);
    // Idempotent: a second pass (a reinvocation) changes nothing.
    expect(mutatePod(result, { slot: "gpu-0", device }).patch).toEqual([]);
  });

  test("a model without sleep support is left alone", () => {
    expect(
      mutatePod(pod([{ name: "e", image: "vllm" }], { "snooze.dev/sleep": "false" }), { slot: "s" }),
    ).toEqual({
      patch: [],
      warnings: [],
    });
  });

  test.each([
    [{ image: "vllm/vllm-openai:latest" }, true],
    [{ image: "x", command: ["python3", "-m", "vllm.entrypoints.openai.api_server"] }, true],
    [{ image: "x", command: ["/usr/local/bin/vllm"], args: ["serve"] }, true],
    [{ image: "x", command: ["sh", "-c", "exec vllm serve m"] }, true],
    [{ image: "nginx", command: ["nginx"] }, false],
  ])("isVllmContainer(%j) = %s", (container, expected) => {
    expect(isVllmContainer(container)).toBe(expected);
  });
});
