/**
 * Everything one simulated engine is configured with, its defaults, and the
 * `snooze sim` flags that set it. vLLM's own flag names are kept where vLLM
 * has one, so one command template serves `vllm serve` and `snooze sim`.
 */
import type { ArgToken } from "../../cli/command.ts";
import { durationValue } from "../../cli/flags.ts";
import { type Flag, type FlagValues, UsageError } from "../../lib/cli-flags.ts";
import { humanReadableIntOrAuto, pythonInt } from "./argparse-int.ts";
import { type Faults, noFaults } from "./faults.ts";
import { defaultGpuDir } from "./gpu-ledger.ts";
import { parseSize } from "./size.ts";
import { ignoredFlag } from "./vllm-args.ts";

export interface SimGpuOptions {
  /** Engines with the same id on one machine share one memory budget. */
  id: string;
  memoryBytes: number;
  /** The weights; the KV cache takes the rest of `--gpu-memory-utilization`. */
  modelBytes: number;
  /** Where the cross-process ledger lives. */
  dir: string;
}

export interface SimOptions {
  /** The model path or id, as vLLM's positional `model`; `root` in `/v1/models`. */
  model: string;
  /** Names clients may use; the first is the one responses and metrics carry. */
  servedModelNames: string[];
  host: string;
  port: number;
  enableSleepMode: boolean;
  /** vLLM's `VLLM_SERVER_DEV_MODE=1`: without it the sleep endpoints do not exist. */
  devMode: boolean;
  /**
   * vLLM's `--api-key` (or `VLLM_API_KEY`): requests to paths under `/v1` without
   * `Authorization: Bearer <key>` are a 401; the sleep API, `/health` and `/metrics` are not guarded.
   */
  apiKey?: string | undefined;
  /**
   * vLLM's `--enable-request-id-headers`: every answer carries `X-Request-Id`, the request's own or
   * a fresh uuid4 in hex. Off by default, as in vLLM (whose ids in the body follow the request's
   * header either way).
   */
  requestIdHeaders: boolean;
  /** vLLM's `--enable-server-load-tracking`: `/load` counts inference requests in flight (else 0). */
  enableServerLoadTracking: boolean;
  /**
   * vLLM's `--tool-call-parser`, which takes effect only with `--enable-auto-tool-choice`
   * (`enableAutoToolChoice`): then chat requests with tools get tool calls (tool-call.ts). Any
   * name is taken, as the simulated model has no markup of its own to parse.
   */
  toolCallParser?: string | undefined;
  enableAutoToolChoice: boolean;
  /**
   * vLLM's `VLLM_ENABLE_RESPONSES_API_STORE=1`: responses are kept for a retrieve and `background`
   * is served. Off by default, as in vLLM.
   */
  responsesStore: boolean;
  maxNumSeqs: number;
  maxModelLen: number;
  gpuMemoryUtilization: number;
  seed: number;
  loadTimeMs: number;
  ttftMs: number;
  ttftJitterMs: number;
  itlMs: number;
  itlJitterMs: number;
  sleepTimeL1Ms: number;
  wakeTimeL1Ms: number;
  sleepTimeL2Ms: number;
  wakeTimeL2Ms: number;
  reloadTimeMs: number;
  /** The first request after a wake runs this many times slower (no warm-up yet). */
  firstRequestSlowdown: number;
  /** Multiplies every simulated delay; 0.01 makes a 2 s load take 20 ms. */
  timeScale: number;
  /** Absent: no simulated GPU, memory is unlimited. */
  gpu?: SimGpuOptions | undefined;
  faults: Faults;
}

export const defaultModel = "sim-model";

export function defaultSimOptions(): SimOptions {
  return {
    model: defaultModel,
    servedModelNames: [defaultModel],
    host: "127.0.0.1",
    port: 8000,
    enableSleepMode: false,
    enableServerLoadTracking: false,
    enableAutoToolChoice: false,
    devMode: process.env.VLLM_SERVER_DEV_MODE === "1",
    apiKey: process.env.VLLM_API_KEY || undefined,
    requestIdHeaders: false,
    // vLLM reads it as an integer flag: "1" on, "0" or unset off.
    responsesStore: Number(process.env.VLLM_ENABLE_RESPONSES_API_STORE ?? "0") !== 0,
    maxNumSeqs: 256,
    maxModelLen: 4096,
    gpuMemoryUtilization: 0.9,
    seed: 0,
    loadTimeMs: 5_000,
    ttftMs: 50,
    ttftJitterMs: 0,
    itlMs: 10,
    itlJitterMs: 0,
    sleepTimeL1Ms: 500,
    wakeTimeL1Ms: 1_000,
    sleepTimeL2Ms: 200,
    wakeTimeL2Ms: 300,
    reloadTimeMs: 2_000,
    firstRequestSlowdown: 3,
    timeScale: 1,
    gpu: undefined,
    faults: noFaults(),
  };
}

/** Options from a partial set, with the defaults filled in (for `startSim` callers). */
export function resolveSimOptions(partial: Partial<SimOptions> = {}): SimOptions {
  // Keys set to undefined keep their default, like keys left out.
  const given = Object.fromEntries(Object.entries(partial).filter(([, value]) => value !== undefined));
  const options = { ...defaultSimOptions(), ...given, faults: { ...noFaults(), ...partial.faults } };
  if (partial.model !== undefined && partial.servedModelNames === undefined)
    options.servedModelNames = [partial.model];
  return options;
}

export const defaultGpuMemory = "80GiB";
export const defaultModelMemory = "16GiB";

/** The `snooze sim` flags, in `--help` order. */
export const simFlags: Record<string, Flag> = {
  model: {
    type: "string",
    placeholder: "name",
    description: "model path or id (same as the positional model)",
  },
  "served-model-name": {
    type: "string",
    multiple: true,
    placeholder: "name",
    description: "name(s) clients use, listed after the flag as vLLM takes them (default: the model)",
  },
  host: { type: "string", default: "127.0.0.1", placeholder: "addr", description: "address to listen on" },
  port: { type: "string", default: "8000", placeholder: "port", description: "port to listen on" },
  "enable-sleep-mode": {
    type: "boolean",
    description: "serve the sleep API (also needs VLLM_SERVER_DEV_MODE=1, as vLLM)",
  },
  "enable-request-id-headers": {
    type: "boolean",
    description: "answer every request with an X-Request-Id header (the request's, else a new one), as vLLM",
  },
  "enable-server-load-tracking": {
    type: "boolean",
    description: "count inference requests in flight in GET /load, as vLLM (else it says 0)",
  },
  "enable-auto-tool-choice": {
    type: "boolean",
    description:
      "with --tool-call-parser: chat requests with tools get tool calls, as vLLM (tool_choice auto, required or named)",
  },
  "tool-call-parser": {
    type: "string",
    placeholder: "name",
    description:
      "vLLM's tool parser; any name, as the simulated model's calls need no parsing (see --enable-auto-tool-choice)",
  },
  "api-key": {
    type: "string",
    placeholder: "key",
    description: "require Authorization: Bearer <key> on /v1 routes, as vLLM (default: $VLLM_API_KEY)",
  },
  "max-num-seqs": {
    type: "string",
    default: "256",
    placeholder: "n",
    description: "requests decoding at once",
  },
  "max-model-len": {
    type: "string",
    default: "4096",
    placeholder: "tokens",
    description: "context length: prompt + max_tokens beyond it is a 400 (as vLLM: 8192, 32k, 16K or auto)",
  },
  "gpu-memory-utilization": {
    type: "string",
    default: "0.9",
    placeholder: "fraction",
    description: "share of --gpu-memory one engine takes (weights + KV cache)",
  },
  seed: { type: "string", default: "0", placeholder: "n", description: "seed of generated text and jitter" },
  "load-time": {
    type: "string",
    default: "5s",
    placeholder: "duration",
    description: "cold start until the port opens",
  },
  ttft: { type: "string", default: "50ms", placeholder: "duration", description: "mean time to first token" },
  "ttft-jitter": {
    type: "string",
    default: "0",
    placeholder: "duration",
    description: "TTFT spread (uniform ±)",
  },
  itl: { type: "string", default: "10ms", placeholder: "duration", description: "mean inter-token latency" },
  "itl-jitter": {
    type: "string",
    default: "0",
    placeholder: "duration",
    description: "ITL spread (uniform ±)",
  },
  "sleep-time-l1": {
    type: "string",
    default: "500ms",
    placeholder: "duration",
    description: "time to sleep at level 1",
  },
  "wake-time-l1": {
    type: "string",
    default: "1s",
    placeholder: "duration",
    description: "time to wake from level 1",
  },
  "sleep-time-l2": {
    type: "string",
    default: "200ms",
    placeholder: "duration",
    description: "time to sleep at level 2",
  },
  "wake-time-l2": {
    type: "string",
    default: "300ms",
    placeholder: "duration",
    description: "time to wake from level 2 (mapping memory; reloading is --reload-time)",
  },
  "reload-time": {
    type: "string",
    default: "2s",
    placeholder: "duration",
    description: "time of collective_rpc reload_weights (weights from disk)",
  },
  "first-request-slowdown": {
    type: "string",
    default: "3",
    placeholder: "factor",
    description: "the first request after a wake is this many times slower",
  },
  "time-scale": {
    type: "string",
    default: "1",
    placeholder: "factor",
    description: "multiplies every simulated delay",
  },
  "gpu-id": {
    type: "string",
    placeholder: "id[,id...]",
    description:
      "simulated GPU; engines with one id share its memory, across processes (default: no GPU model)",
  },
  "gpu-memory": {
    type: "string",
    default: defaultGpuMemory,
    placeholder: "size",
    description: "memory of the GPU",
  },
  "model-memory": {
    type: "string",
    default: defaultModelMemory,
    placeholder: "size",
    description: "memory of the weights; the KV cache gets the rest of the engine's share",
  },
  "gpu-dir": {
    type: "string",
    placeholder: "dir",
    description: "directory of the GPU ledger (default: $SNOOZE_SIM_GPU_DIR or <tmp>/snooze-sim-gpu)",
  },
  engines: {
    type: "string",
    default: "1",
    placeholder: "n",
    description: "engines in this process, one port each",
  },
  "base-port": {
    type: "string",
    placeholder: "port",
    description: "port of the first engine with --engines (default: --port); engine i gets base-port + i",
  },
  "fault-wake-fail": {
    type: "string",
    default: "0",
    placeholder: "n",
    description: "the next n wakes fail with 500",
  },
  "fault-sleep-fail": {
    type: "string",
    default: "0",
    placeholder: "n",
    description: "the next n sleeps fail with 500; the engine stays awake",
  },
  "fault-wake-hang": {
    type: "string",
    default: "0",
    placeholder: "n",
    description: "the next n wakes never answer; the engine is stuck",
  },
  "fault-crash-on-abort-sleep": {
    type: "boolean",
    description: "sleep with mode=abort while requests decode crashes the engine",
  },
  "fault-die-after": {
    type: "string",
    default: "0",
    placeholder: "n",
    description: "the engine dies after finishing n inference requests (0: never)",
  },
  "fault-drop-connection": {
    type: "string",
    default: "0",
    placeholder: "n",
    description: "the next n inference requests have their connection reset before any answer",
  },
  "fault-never-ready": { type: "boolean", description: "loading never finishes: the port never opens" },
  // Set by simArgsFromVllm for each vLLM flag without effect here, so the start-up log can name it.
  [ignoredFlag]: {
    type: "string",
    multiple: true,
    hidden: true,
    description: "a vLLM flag (with its value) that has no effect in the simulator",
  },
};

export interface LaunchOptions {
  engines: number;
  basePort: number;
  /** Round-robin over engines when several ids are given. */
  gpuIds: string[];
  /** Options of engine 0; the launcher derives the others. */
  engine: SimOptions;
}

/** Reads the `snooze sim` flags; a bad value is a UsageError (exit code 2). */
export function parseSimFlags(
  values: FlagValues,
  positionals: string[],
  tokens: readonly ArgToken[],
): LaunchOptions {
  const servedFlag = (values["served-model-name"] as string[] | undefined) ?? [];
  // vLLM's `--served-model-name a b` takes several words; parseArgs leaves the words after the
  // first as positionals. Those written right after it are names (`sim --served-model-name a b`
  // serves a and b); another is the model.
  const moreNames = namesAfterServedFlag(tokens);
  const [positionalModel, ...extraModels] = positionals.filter((_, i) => !moreNames.indices.has(i));
  if (extraModels.length > 0) {
    throw new UsageError(`one model expected, got ${positionals.join(" ")}`);
  }
  const flagModel = values.model as string | undefined;
  if (flagModel !== undefined && positionalModel !== undefined && flagModel !== positionalModel) {
    throw new UsageError(`the model was given twice: ${positionalModel} and --model ${flagModel}`);
  }
  const model = positionalModel ?? flagModel ?? defaultModel;
  // As in vLLM (nargs='+'), each word is one name, a comma or space in it included. Given twice,
  // vLLM keeps only the last: refused here, so that no command works on the simulator and not on vLLM.
  if (servedFlag.length > 1)
    throw new UsageError(
      `--served-model-name is given ${servedFlag.length} times; vLLM would serve only the last (${servedFlag.at(-1)}): list every name after one --served-model-name, as in --served-model-name ${servedFlag.join(" ")}`,
    );
  const served = [...servedFlag, ...moreNames.names];

  const text = (name: string) => values[name] as string;
  // Each delay arms a timer: read as every Snooze duration flag is, up to the longest a timer waits.
  const duration = (name: string) => durationValue(values, name);
  const number = (name: string, check: (n: number) => boolean, expected: string) => {
    const value = Number(text(name));
    if (text(name).trim() === "" || !Number.isFinite(value) || !check(value)) {
      throw new UsageError(`--${name}: "${text(name)}" is not ${expected}`);
    }
    return value;
  };
  // Read as vLLM's argparse reads an int (Python's int()); Number() also took "0x10", "1e3" and
  // "0b1", which vLLM refuses (found by an outside tester).
  const integer = (name: string, min: number) => {
    const value = pythonInt(text(name));
    if (value === undefined || value < min)
      throw new UsageError(`--${name}: "${text(name)}" is not an integer >= ${min}`);
    return value;
  };
  // vLLM reads it as a size (`32k`, `16K`) or `auto`: such a command line was refused here.
  const maxModelLen = () => {
    const read = humanReadableIntOrAuto(text("max-model-len"));
    // The longest context the model takes: the simulated model's is the default.
    if (read === "auto") return defaultSimOptions().maxModelLen;
    if (typeof read === "object") throw new UsageError(`--max-model-len: ${read.problem}`);
    if (read === undefined || read < 1)
      throw new UsageError(
        `--max-model-len: "${text("max-model-len")}" is not a number of tokens >= 1 (as 8192, 32k, 16K) or auto`,
      );
    return read;
  };
  const size = (name: string) => {
    const bytes = parseSize(text(name));
    if (bytes === undefined || bytes <= 0)
      throw new UsageError(`--${name}: "${text(name)}" is not a size like 16GiB`);
    return bytes;
  };

  const port = integer("port", 0);
  if (port > 65_535) throw new UsageError(`--port: ${port} is not a port`);
  const engines = integer("engines", 1);
  const basePort = values["base-port"] === undefined ? port : integer("base-port", 1);
  if (basePort + engines - 1 > 65_535)
    throw new UsageError(`--base-port: ${engines} engines do not fit below 65536`);
  if (engines > 1 && basePort === 0)
    throw new UsageError("--engines needs a --base-port (or --port) other than 0");

  const gpuIds = ((values["gpu-id"] as string | undefined) ?? "").split(",").filter(Boolean);
  const gpuMemory = size("gpu-memory");
  const modelMemory = size("model-memory");
  const utilization = number("gpu-memory-utilization", (n) => n > 0 && n <= 1, "a fraction in (0, 1]");
  if (gpuIds.length > 0 && modelMemory >= utilization * gpuMemory) {
    throw new UsageError(
      `--model-memory ${text("model-memory")} leaves no room for the KV cache in ` +
        `--gpu-memory-utilization ${utilization} of --gpu-memory ${text("gpu-memory")}`,
    );
  }

  const toolCallParser = (values["tool-call-parser"] as string | undefined) || undefined;
  // vLLM checks this pair before loading anything (`validate_parsed_serve_args`).
  if (values["enable-auto-tool-choice"] === true && toolCallParser === undefined)
    throw new UsageError("Error: --enable-auto-tool-choice requires --tool-call-parser");

  const engine: SimOptions = {
    ...defaultSimOptions(),
    model,
    servedModelNames: served.length > 0 ? served : [model],
    host: text("host"),
    port: engines > 1 ? basePort : port,
    enableSleepMode: values["enable-sleep-mode"] === true,
    enableServerLoadTracking: values["enable-server-load-tracking"] === true,
    enableAutoToolChoice: values["enable-auto-tool-choice"] === true,
    toolCallParser,
    apiKey: (values["api-key"] as string | undefined) || defaultSimOptions().apiKey,
    requestIdHeaders: values["enable-request-id-headers"] === true,
    maxNumSeqs: integer("max-num-seqs", 1),
    maxModelLen: maxModelLen(),
    gpuMemoryUtilization: utilization,
    seed: integer("seed", 0),
    loadTimeMs: duration("load-time"),
    ttftMs: duration("ttft"),
    ttftJitterMs: duration("ttft-jitter"),
    itlMs: duration("itl"),
    itlJitterMs: duration("itl-jitter"),
    sleepTimeL1Ms: duration("sleep-time-l1"),
    wakeTimeL1Ms: duration("wake-time-l1"),
    sleepTimeL2Ms: duration("sleep-time-l2"),
    wakeTimeL2Ms: duration("wake-time-l2"),
    reloadTimeMs: duration("reload-time"),
    firstRequestSlowdown: number("first-request-slowdown", (n) => n >= 1, "a factor >= 1"),
    timeScale: number("time-scale", (n) => n > 0, "a positive factor"),
    gpu:
      gpuIds.length > 0
        ? {
            id: gpuIds[0]!,
            memoryBytes: gpuMemory,
            modelBytes: modelMemory,
            dir: (values["gpu-dir"] as string | undefined) ?? defaultGpuDir(),
          }
        : undefined,
    faults: {
      wakeFail: integer("fault-wake-fail", 0),
      sleepFail: integer("fault-sleep-fail", 0),
      wakeHang: integer("fault-wake-hang", 0),
      crashOnAbortSleep: values["fault-crash-on-abort-sleep"] === true,
      dieAfter: integer("fault-die-after", 0),
      dropConnection: integer("fault-drop-connection", 0),
      neverReady: values["fault-never-ready"] === true,
    },
  };
  return { engines, basePort, gpuIds, engine };
}

/**
 * The positionals written right after `--served-model-name`'s value (vLLM reads `a b` as two
 * names there), and their places among the positionals.
 */
function namesAfterServedFlag(tokens: readonly ArgToken[]): { names: string[]; indices: Set<number> } {
  const names: string[] = [];
  const indices = new Set<number>();
  let after = false;
  let position = -1;
  for (const token of tokens) {
    if (token.kind === "positional") {
      position++;
      if (!after) continue;
      names.push(token.value);
      indices.add(position);
    }
    // `--served-model-name=a b`: argparse takes only `a` then (b is the model).
    else after = token.kind === "option" && token.name === "served-model-name" && !token.inlineValue;
  }
  return { names, indices };
}
