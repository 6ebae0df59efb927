import { expect, test } from "vitest";
import { parseCommandArgs } from "../../cli/command.ts";
import { simCommand } from "../../cli/sim.ts";
import { engineOptions } from "../../hack/sim/launcher.ts";
import { parseSimFlags } from "../../hack/sim/options.ts";
import { UsageError } from "../../lib/cli-flags.ts";

const parse = (...argv: string[]) => {
  const { values, positionals, tokens } = parseCommandArgs(simCommand, argv);
  return parseSimFlags(values, positionals, tokens);
};

test("with no flags: one engine serving sim-model on 127.0.0.1:8000, no GPU, no faults", () => {
  const launch = parse();
  expect(launch.engines).toBe(1);
  expect(launch.engine).toMatchObject({
    model: "sim-model",
    servedModelNames: ["sim-model"],
    host: "127.0.0.1",
    port: 8000,
    enableSleepMode: false,
    maxNumSeqs: 256,
    loadTimeMs: 5_000,
    timeScale: 1,
    gpu: undefined,
    faults: {
      wakeFail: 0,
      sleepFail: 0,
      wakeHang: 0,
      crashOnAbortSleep: false,
      dieAfter: 0,
      dropConnection: 0,
      neverReady: false,
    },
  });
});

test("vLLM's spellings of the model and served names", () => {
  expect(parse("org/m").engine.servedModelNames).toEqual(["org/m"]);
  expect(parse("--model", "org/m").engine.model).toBe("org/m");
  expect(parse("org/m", "--served-model-name", "a", "b").engine.servedModelNames).toEqual(["a", "b"]);
  // A comma is no separator in vLLM (its flag takes words, nargs='+'): `a,b` is one name, as a
  // model id with a comma is (found by an outside tester: the simulator served `a`).
  expect(parse("--served-model-name", "a,b").engine.servedModelNames).toEqual(["a,b"]);
  expect(parse("m", "--served-model-name", "a,b", "c d").engine.servedModelNames).toEqual(["a,b", "c d"]);
  // Given twice, vLLM keeps only the last: refused, so no command works here that differs there.
  expect(() => parse("--served-model-name", "a", "--served-model-name", "c")).toThrow(
    "--served-model-name is given 2 times; vLLM would serve only the last (c): list every name after one --served-model-name, as in --served-model-name a c",
  );
  expect(() => parse("one", "two")).toThrow(UsageError);
  expect(() => parse("one", "--model", "two")).toThrow(UsageError);
  // The words right after the flag are names, as vLLM's argparse reads them; the model comes
  // before the flag, or after another flag (found by an outside tester: `b` became the model).
  expect(parse("--served-model-name", "a", "b").engine).toMatchObject({
    model: "sim-model",
    servedModelNames: ["a", "b"],
  });
  expect(parse("--served-model-name", "a", "b", "--port", "9", "org/m").engine).toMatchObject({
    model: "org/m",
    servedModelNames: ["a", "b"],
  });
  expect(parse("--served-model-name=a", "b").engine).toMatchObject({ model: "b", servedModelNames: ["a"] });
  expect(() => parse("one", "--served-model-name", "a", "--port", "9", "two")).toThrow(
    "one model expected, got one two",
  );
  // A vLLM flag the simulator ignores ends the served names too, as argparse reads it.
  expect(parse("--served-model-name", "a", "--trust-remote-code", "org/m").engine).toMatchObject({
    model: "org/m",
    servedModelNames: ["a"],
  });
});

test("durations, sizes and faults are read; bad ones are usage errors naming the flag", () => {
  const launch = parse(
    "--ttft",
    "1.5s",
    "--gpu-id",
    "0",
    "--gpu-memory",
    "24GiB",
    "--model-memory",
    "8Gi",
    "--fault-wake-fail",
    "2",
    "--fault-never-ready",
  );
  expect(launch.engine.ttftMs).toBe(1_500);
  expect(launch.engine.gpu).toMatchObject({ id: "0", memoryBytes: 24 * 2 ** 30, modelBytes: 8 * 2 ** 30 });
  expect(launch.engine.faults).toMatchObject({ wakeFail: 2, neverReady: true });
  expect(() => parse("--itl", "fast")).toThrow("--itl");
  expect(() => parse("--gpu-id", "0", "--gpu-memory", "lots")).toThrow("--gpu-memory");
  expect(() => parse("--max-num-seqs", "0")).toThrow("--max-num-seqs");
  expect(() => parse("--time-scale", "0")).toThrow("--time-scale");
  expect(() => parse("--gpu-id", "0", "--model-memory", "80GiB")).toThrow("no room for the KV cache");
  expect(() => parse("--engines", "2", "--port", "0")).toThrow("--base-port");
});

test("a whole-number flag is read as vLLM's argparse reads it: decimal digits, not hex or an exponent", () => {
  // Found by an outside tester: `--port 0x10` listened on port 16 and `--max-num-seqs 1e3` was 1000,
  // where vLLM (Python's int()) refuses both: a command would work on the simulator and not on vLLM.
  for (const [flag, value] of [
    ["port", "0x10"],
    ["max-num-seqs", "1e3"],
    ["seed", "0b1"],
    ["engines", "2.0"],
    ["fault-wake-fail", "Infinity"],
  ] as const)
    expect(() => parse(`--${flag}`, value)).toThrow(`--${flag}: "${value}" is not an integer`);
  // Python's int() takes a sign and spaces around the digits.
  expect(parse("--max-num-seqs", " +8 ").engine.maxNumSeqs).toBe(8);
  // A seed past 2^53 cannot be held exactly: refused rather than rounded to another seed.
  expect(() => parse("--seed", "9007199254740993")).toThrow('--seed: "9007199254740993" is not an integer');
});

test("--max-model-len is read as vLLM's argparse reads it: 32k, 16K, 25.6k, auto and -1 too", () => {
  // vLLM reads it with `human_readable_int_or_auto`: a command line that vLLM starts with
  // `--max-model-len 32k` was refused here ("not an integer >= 1").
  const len = (value: string) => parse("--max-model-len", value).engine.maxModelLen;
  expect(len("32k")).toBe(32_000);
  expect(len("16K")).toBe(16_384);
  expect(len("25.6k")).toBe(25_600);
  expect(len("1m")).toBe(1_000_000);
  expect(len(" 8192 ")).toBe(8192);
  // Python's int() takes digits grouped by underscores.
  expect(len("32_768")).toBe(32_768);
  // auto (or -1): the longest the model takes, which for the simulated model is its default.
  expect(len("auto")).toBe(4096);
  expect(len("AUTO")).toBe(4096);
  expect(len("-1")).toBe(4096);
  expect(parse("--max-model-len=-1").engine.maxModelLen).toBe(4096);
  expect(() => parse("--max-model-len", "1.5K")).toThrow(
    "--max-model-len: decimals are not allowed with binary suffixes like K; did you mean 1.5k?",
  );
  for (const value of ["lots", "0x10", "1e3", "32 k", "0", "-2"])
    expect(() => parse("--max-model-len", value)).toThrow(`--max-model-len: "${value}" is not`);
});

test("a whole-number flag takes digits grouped by underscores, as Python's int() does", () => {
  expect(parse("--max-num-seqs", "1_024").engine.maxNumSeqs).toBe(1024);
  expect(() => parse("--max-num-seqs", "1__024")).toThrow('--max-num-seqs: "1__024" is not an integer');
  expect(() => parse("--max-num-seqs", "_1")).toThrow('--max-num-seqs: "_1" is not an integer');
});

test("a delay flag stops where a timer can wait, as every Snooze duration does", () => {
  // Longer, Node fires the timer after 1 ms: a --load-time of 720h opened the port at once.
  expect(parse("--load-time", "596h31m23.647s").engine.loadTimeMs).toBe(2 ** 31 - 1);
  for (const flag of ["load-time", "ttft", "itl-jitter", "wake-time-l1", "reload-time"])
    expect(() => parse(`--${flag}`, "720h")).toThrow(
      `--${flag} is too long: at most 596h31m23.647s (2^31-1 ms, about 24.8 days: the longest a timer waits), not "720h"`,
    );
});

test("--engines: consecutive ports, indexed names, GPU ids round-robin", () => {
  const launch = parse(
    "--engines",
    "3",
    "--base-port",
    "9000",
    "--served-model-name",
    "m",
    "--gpu-id",
    "x,y",
  );
  expect(
    [0, 1, 2].map((i) => engineOptions(launch, i)).map((o) => [o.port, o.servedModelNames, o.gpu?.id]),
  ).toEqual([
    [9000, ["m-0"], "x"],
    [9001, ["m-1"], "y"],
    [9002, ["m-2"], "x"],
  ]);
});

test("--enable-request-id-headers turns on vLLM's X-Request-Id answers (off by default)", () => {
  expect(parse().engine.requestIdHeaders).toBe(false);
  expect(parse("--enable-request-id-headers").engine.requestIdHeaders).toBe(true);
});

test("tool calls need both --enable-auto-tool-choice and --tool-call-parser; the first alone is vLLM's start-up error", () => {
  expect(parse().engine).toMatchObject({ enableAutoToolChoice: false, toolCallParser: undefined });
  expect(parse("--enable-auto-tool-choice", "--tool-call-parser", "hermes").engine).toMatchObject({
    enableAutoToolChoice: true,
    toolCallParser: "hermes",
  });
  expect(parse("--tool-call-parser=llama3_json").engine.toolCallParser).toBe("llama3_json");
  expect(() => parse("--enable-auto-tool-choice")).toThrow(
    new UsageError("Error: --enable-auto-tool-choice requires --tool-call-parser"),
  );
});
