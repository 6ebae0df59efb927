import { expect, test } from "vitest";
import { UsageError } from "../../lib/cli-flags.ts";
import { simFlags } from "./options.ts";
import { simArgsFromVllm, UnrecognizedFlag } from "./vllm-args.ts";
import { vllmFlags } from "./vllm-flags.ts";

const read = (...argv: string[]) => simArgsFromVllm(argv, simFlags);
const ignored = (text: string) => `--vllm-flag-ignored=${text}`;

test("vLLM's flags that change nothing here are taken with their values, as argparse takes them", () => {
  expect(
    read("org/m", "--dtype", "bfloat16", "--tensor-parallel-size=2", "--enforce-eager", "--port", "9"),
  ).toEqual([
    "org/m",
    ignored("--dtype bfloat16"),
    ignored("--tensor-parallel-size 2"),
    ignored("--enforce-eager"),
    "--port",
    "9",
  ]);
  // A value is never the positional model, a flag without one never takes it.
  expect(read("--quantization", "awq", "--trust-remote-code", "org/m")).toEqual([
    ignored("--quantization awq"),
    ignored("--trust-remote-code"),
    "org/m",
  ]);
  // A list takes every word up to the next flag; `--no-` turns an on-off flag off.
  expect(read("--ignore-patterns", "a", "b", "--no-enable-prefix-caching", "m")).toEqual([
    ignored("--ignore-patterns a b"),
    ignored("--no-enable-prefix-caching"),
    "m",
  ]);
  // vLLM's short spellings, -O3, JSON keys one by one, negative numbers as values.
  expect(read("-tp", "4", "-O3", "-q=fp8", "--compilation-config.level", "3", "--rope-theta", "-1")).toEqual([
    ignored("-tp 4"),
    ignored("-O 3"),
    ignored("-q fp8"),
    ignored("--compilation-config.level 3"),
    ignored("--rope-theta -1"),
  ]);
  // `--hf-token` takes the next word when it is no flag (argparse's nargs="?").
  expect(read("--hf-token", "--dtype=auto")).toEqual([ignored("--hf-token"), ignored("--dtype auto")]);
});

test("the simulator's own flags pass on, `_` read as `-`; `--no-` of one of vLLM's turns it off", () => {
  expect(read("--max_model_len", "8192", "--served_model_name=a", "--load-time", "0")).toEqual([
    "--max-model-len",
    "8192",
    "--served-model-name=a",
    "--load-time",
    "0",
  ]);
  expect(read("--enable-sleep-mode", "--no-enable-sleep-mode", "m")).toEqual(["m"]);
  expect(read("--no-enable-sleep-mode", "--enable-sleep-mode")).toEqual(["--enable-sleep-mode"]);
  // The tool-calling pair has an effect (tool calls), so it is the simulator's, not ignored.
  expect(read("--enable_auto_tool_choice", "--tool-call-parser", "hermes")).toEqual([
    "--enable-auto-tool-choice",
    "--tool-call-parser",
    "hermes",
  ]);
  // An ignored flag between the served names and the model keeps its place: `b` is the model.
  expect(read("--served-model-name", "a", "--enforce-eager", "b")).toEqual([
    "--served-model-name",
    "a",
    ignored("--enforce-eager"),
    "b",
  ]);
  // A negative number after one of its own flags is its value, as argparse takes it (`-1` is vLLM's
  // `--max-model-len` auto): passed on joined, or the parser read it as a flag of its own.
  expect(read("--max-model-len", "-1", "m")).toEqual(["--max-model-len=-1", "m"]);
  expect(read("--seed", "-3")).toEqual(["--seed=-3"]);
  // vLLM's `--help=all` (every flag), `--help=<group or keyword>`: the simulator's help, all of it.
  expect(read("--help=all")).toEqual(["--help"]);
  expect(read("--help=max-model-len")).toEqual(["--help"]);
  expect(read("-h", "--", "--dtype")).toEqual(["-h", "--", "--dtype"]);
});

test("what vLLM refuses is refused in its words; flags that would change what a client sees are refused", () => {
  expect(() => read("--frobnicate", "1")).toThrow(UnrecognizedFlag);
  expect(() => read("--frobnicate")).toThrow("unrecognized arguments: --frobnicate");
  expect(() => read("-x")).toThrow("unrecognized arguments: -x");
  expect(() => read("--no-fault-never-ready")).toThrow("unrecognized arguments: --no-fault-never-ready");
  expect(() => read("--no-dtype")).toThrow("unrecognized arguments: --no-dtype");
  expect(() => read("--dtype")).toThrow("argument --dtype: expected one argument");
  expect(() => read("--dtype", "--enforce-eager")).toThrow("argument --dtype: expected one argument");
  expect(() => read("--ignore-patterns")).toThrow(
    "argument --ignore-patterns: expected at least one argument",
  );
  expect(() => read("--enforce-eager=yes")).toThrow(
    "argument --enforce-eager: ignored explicit argument 'yes'",
  );
  expect(() => read("--ssl-certfile", "c.pem")).toThrow(
    "--ssl-certfile is not simulated: the simulator serves plain HTTP",
  );
  expect(() => read("--config", "c.yaml")).toThrow(UsageError);
  // A value argparse refuses, for a flag the simulator takes without modelling it.
  expect(() => read("--dtype", "fp4")).toThrow("argument --dtype: invalid choice: 'fp4'");
  expect(() => read("-pp=two")).toThrow("argument --pipeline-parallel-size/-pp: invalid int value: 'two'");
  expect(() => read("-pp", "1.0")).toThrow("invalid int value: '1.0'");
  expect(() => read("--cpu-offload-gb", "4GB")).toThrow(
    "argument --cpu-offload-gb: invalid float value: '4GB'",
  );
  // As vLLM takes them: Python's int() and float() spellings, the choices as written.
  for (const args of [
    ["--dtype", "bfloat16"],
    ["-tp", "2"],
    ["--tensor-parallel-size", " 4 "],
    ["--max-num-batched-tokens", "8k"],
    ["--swap-space", "1e1"],
    ["-q", "compressed-tensors"],
    ["--quantization=fp8"],
    ["--scheduling-policy", "priority"],
  ])
    expect(() => read(...args), args.join(" ")).not.toThrow();
});

test("every flag the simulator shares with vLLM is one vLLM has", () => {
  const shared = ["model", "served-model-name", "host", "port", "enable-sleep-mode", "api-key", "seed"];
  shared.push("enable-request-id-headers", "enable-server-load-tracking", "max-num-seqs", "max-model-len");
  shared.push("gpu-memory-utilization", "enable-auto-tool-choice", "tool-call-parser");
  for (const name of shared) {
    expect(simFlags[name], name).toBeDefined();
    expect(vllmFlags.has(name), name).toBe(true);
  }
});

test("a flag's unique beginning is the flag, as vLLM's argparse takes it; one several flags begin with is refused in its words", () => {
  // Found by a probe: `vllm serve m --enable-sleep` starts vLLM (argparse allows abbreviations, and
  // vLLM's parser keeps them), while the simulator said "unrecognized arguments: --enable-sleep".
  expect(read("m", "--enable-sleep", "--max-model", "8192")).toEqual([
    "m",
    "--enable-sleep-mode",
    "--max-model-len",
    "8192",
  ]);
  expect(read("--load-t=2s", "--tensor-parallel", "2")).toEqual([
    "--load-time=2s",
    ignored("--tensor-parallel 2"),
  ]);
  expect(() => read("--max", "1")).toThrow(/^ambiguous option: --max could match (--max-[a-z-]+, )+--max-/);
  // The whole name wins over a longer one it begins (`--port` is not ambiguous with `--port-x`).
  expect(read("--port", "9")).toEqual(["--port", "9"]);
});
