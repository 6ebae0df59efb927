import { describe, expect, test } from "vitest";
import { sleepModeWarnings } from "./sleep-mode-check.ts";

const deployment = (container: Record<string, unknown>, more: Record<string, unknown>[] = []) => ({
  spec: {
    template: {
      spec: { containers: [{ name: "vllm", image: "vllm/vllm-openai:v0.11.0", ...container }, ...more] },
    },
  },
});
const ref = { kind: "Deployment", name: "qwen" };
const devMode = { env: [{ name: "VLLM_SERVER_DEV_MODE", value: "1" }] };

describe("sleepModeWarnings", () => {
  test("a vLLM container without both: one warning naming both and what to do", () => {
    expect(sleepModeWarnings(ref, deployment({ args: ["Qwen/Qwen3-0.6B"] }))).toEqual([
      'Deployment "qwen": container "vllm" runs vLLM without --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1, ' +
        "which vLLM serves its sleep endpoints only with: each sleep Snooze asks for would fail and stop the engine " +
        'instead (a cold start at its next request). Add them to the container, or set snooze.dev/sleep: "false" ' +
        "(a Model's spec.sleep: false) for a model that cannot sleep",
    ]);
  });

  test.each([
    ["the flag and the variable", { args: ["m", "--enable-sleep-mode"], ...devMode }, []],
    ["the flag with a value", { args: ["--enable-sleep-mode=true"], ...devMode }, []],
    // vLLM turns underscores into dashes and takes argparse's abbreviations: no false warning.
    ["the flag with underscores", { args: ["m", "--enable_sleep_mode"], ...devMode }, []],
    ["the flag shortened as vLLM takes it", { args: ["m", "--enable-sleep"], ...devMode }, []],
    [
      "the flag in a shell command",
      { command: ["sh", "-c", "vllm serve m --enable-sleep-mode"], ...devMode },
      [],
    ],
    ["a --config file (it may set the flag)", { args: ["--config", "/etc/vllm.yaml"], ...devMode }, []],
    [
      "the variable from a reference",
      { args: ["--enable-sleep-mode"], env: [{ name: "VLLM_SERVER_DEV_MODE", valueFrom: {} }] },
      [],
    ],
    [
      "an envFrom (it may set the variable)",
      { args: ["--enable-sleep-mode"], envFrom: [{ configMapRef: { name: "x" } }] },
      [],
    ],
    ["the flag only", { args: ["--enable-sleep-mode"] }, ["VLLM_SERVER_DEV_MODE=1"]],
    [
      "the variable as 0",
      { args: ["--enable-sleep-mode"], env: [{ name: "VLLM_SERVER_DEV_MODE", value: "0" }] },
      ["VLLM_SERVER_DEV_MODE=1"],
    ],
    ["the variable only", { ...devMode }, ["--enable-sleep-mode"]],
  ] as const)("%s", (_name, container, missing) => {
    const warnings = sleepModeWarnings(ref, deployment(container as Record<string, unknown>));
    expect(warnings).toHaveLength(missing.length === 0 ? 0 : 1);
    if (missing.length > 0) expect(warnings[0]).toContain(`runs vLLM without ${missing.join(" and ")},`);
  });

  test("only containers that name vLLM are judged; each of them is", () => {
    expect(sleepModeWarnings(ref, deployment({ image: "ghcr.io/acme/engine:1" }))).toEqual([]);
    const two = sleepModeWarnings(
      ref,
      deployment({ args: ["--enable-sleep-mode"], ...devMode }, [
        { name: "proxy", image: "envoy" },
        { name: "second", command: ["vllm", "serve", "m"] },
      ]),
    );
    expect(two).toHaveLength(1);
    expect(two[0]).toContain('container "second"');
  });
});
