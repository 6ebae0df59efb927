import { expect, test } from "vitest";
import { parseCommandArgs } from "../../cli/command.ts";
import { simCommand } from "../../cli/sim.ts";
import { engineOptions } from "../../hack/sim/launcher.ts";
import { parseSimFlags } from "../../hack/sim/options.ts";
import { UsageError } from "../../lib/cli-flags.ts";

const parse = (...argv: string[]) => {
  const { values, positionals } = parseCommandArgs(simCommand, argv);
  return parseSimFlags(values, positionals);
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
  expect(parse("--served-model-name", "a,b", "--served-model-name", "c").engine.servedModelNames).toEqual([
    "a",
    "b",
    "c",
  ]);
  expect(() => parse("one", "two")).toThrow(UsageError);
  expect(() => parse("one", "--model", "two")).toThrow(UsageError);
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
