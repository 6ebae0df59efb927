/**
 * `snooze sim` as real processes: what the local platform and `npm start` run.
 */
import { type ChildProcess, execFileSync, spawn } from "node:child_process";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { open } from "node:fs/promises";
import * as path from "node:path";
import OpenAI from "openai";
import { afterEach, describe, expect, test, vi } from "vitest";
import { main } from "../../cli/main.ts";
import { simFlags } from "../../hack/sim/options.ts";
import {
  chat,
  freePort,
  freePortRange,
  getJson,
  portOpen,
  post,
  postJson,
  SseStream,
  settlesWithin,
  sim,
  tempDir,
} from "./helpers.ts";

const node = path.resolve("node_modules/.bin/node");
const children: ChildProcess[] = [];

afterEach(() => {
  for (const child of children.splice(0)) if (child.exitCode === null) child.kill("SIGKILL");
});

interface SimProcess {
  child: ChildProcess;
  exited: Promise<number | null>;
  stderr(): string;
  /** Resolves when the process logged `msg` (a JSON log line); rejects if it exits first. */
  logged(msg: string, timeoutMs?: number): Promise<void>;
}

function snoozeSim(args: string[], env: Record<string, string> = {}): SimProcess {
  const child = spawn(node, ["bin/snooze.js", "sim", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: { ...process.env, SNOOZE_LOG_LEVEL: "info", ...env },
  });
  children.push(child);
  let stderr = "";
  const listeners = new Set<() => void>();
  child.stderr!.on("data", (chunk: Buffer) => {
    stderr += chunk;
    for (const listener of listeners) listener();
  });
  child.stdout!.resume();
  const exited = new Promise<number | null>((resolve) => child.once("close", (code) => resolve(code)));
  const logged = (msg: string, timeoutMs = 10_000) =>
    new Promise<void>((resolve, reject) => {
      const check = () => {
        if (stderr.includes(`"msg":"${msg}"`)) {
          listeners.delete(check);
          clearTimeout(timer);
          resolve();
        }
      };
      const timer = setTimeout(
        () => reject(new Error(`no "${msg}" within ${timeoutMs}ms:\n${stderr}`)),
        timeoutMs,
      );
      listeners.add(check);
      check();
      void exited.then(() => {
        check();
        reject(new Error(`exited before logging "${msg}":\n${stderr}`));
      });
    });
  return { child, exited, stderr: () => stderr, logged };
}

describe("snooze sim as a process", () => {
  test("--help lists every flag; bad flags exit 2 naming the flag", async () => {
    // Through the CLI's entry point in this process: no Node start-up per case.
    const out: string[] = [];
    const log = vi.spyOn(console, "log").mockImplementation((text: string) => void out.push(text));
    const error = vi.spyOn(console, "error").mockImplementation((text: string) => void out.push(text));
    try {
      expect(await main(["sim", "--help"])).toBe(0);
      for (const [flag, spec] of Object.entries(simFlags))
        if (!spec.hidden) expect(out.join("\n")).toContain(`--${flag}`);
      out.length = 0;
      expect(await main(["sim", "--load-time", "soon"])).toBe(2);
      expect(out.join("\n")).toContain(
        '--load-time must be a duration like 250ms, 30s, 5m or 1h30m, not "soon"',
      );
      out.length = 0;
      expect(await main(["sim", "--gpu-count", "2"])).toBe(2);
      expect(out.join("\n")).toContain("--gpu-count");
      // A flag vLLM does not have either is refused in vLLM's words, as `vllm serve` refuses it.
      out.length = 0;
      expect(await main(["sim", "org/m", "--frobnicate", "1"])).toBe(2);
      expect(out.join("\n")).toContain(
        "snooze sim: unrecognized arguments: --frobnicate (a flag neither vLLM nor the simulator has)",
      );
      // A value vLLM's argparse refuses at start, for a flag the simulator does not model: refused
      // in its words (found by an outside tester: `--dtype bogus` and `-tp x` started).
      for (const [args, said] of [
        [
          ["--dtype", "bogus"],
          "snooze sim: argument --dtype: invalid choice: 'bogus' (choose from 'auto', 'half',",
        ],
        [["-tp", "x"], "snooze sim: argument --tensor-parallel-size/-tp: invalid int value: 'x'"],
        [["--tensor_parallel_size=2.5"], "argument --tensor-parallel-size/-tp: invalid int value: '2.5'"],
        [["--quantization", "q9"], "snooze sim: argument --quantization/-q: invalid choice: 'q9'"],
        [["--swap-space", "lots"], "snooze sim: argument --swap-space: invalid float value: 'lots'"],
        [["--gpu-memory-utilization", "abc"], '--gpu-memory-utilization: "abc" is not a fraction'],
      ] as const) {
        out.length = 0;
        expect(await main(["sim", "org/m", ...args]), args.join(" ")).toBe(2);
        expect(out.join("\n")).toContain(said);
      }
    } finally {
      log.mockRestore();
      error.mockRestore();
    }
  });

  test("vLLM's invocation; the port opens after --load-time; SIGTERM lets an in-flight stream finish", async () => {
    const port = await freePort();
    const run = snoozeSim(
      [
        "org/model-7b",
        "--served-model-name",
        "qwen",
        "qwen-alias",
        "--port",
        String(port),
        "--enable-sleep-mode",
        "--load-time",
        "400ms",
        "--itl",
        "20ms",
        "--wake-time-l1",
        "0",
        "--max-model-len",
        "1024",
      ],
      { VLLM_SERVER_DEV_MODE: "1" },
    );
    await run.logged("loading");
    const loadingSince = performance.now();
    expect(await portOpen(port)).toBe(false);
    await run.logged("listening");
    expect(performance.now() - loadingSince).toBeGreaterThanOrEqual(300);
    const url = `http://127.0.0.1:${port}`;
    expect((await fetch(`${url}/health`)).status).toBe(200);
    const models = (await getJson(url, "/v1/models")).json.data;
    expect(models.map((m: any) => [m.id, m.root, m.max_model_len])).toEqual([
      ["qwen", "org/model-7b", 1024],
      ["qwen-alias", "org/model-7b", 1024],
    ]);
    expect((await post(url, "/sleep?level=1")).status).toBe(200);
    expect((await getJson(url, "/is_sleeping")).json).toEqual({ is_sleeping: true });
    expect((await post(url, "/wake_up")).status).toBe(200);

    const stream = new SseStream(
      await post(url, "/v1/chat/completions", chat("x", { max_tokens: 10, stream: true })),
    );
    await stream.until((s) => s.tokens >= 1);
    run.child.kill("SIGTERM");
    expect((await stream.rest()).at(-1)).toBe("[DONE]");
    expect(stream.finishReason).toBe("length");
    expect(await run.exited).toBe(0);
  });

  test("a command line copied from vLLM's docs starts it, tool calls included; the flags without effect are named once", async () => {
    const port = await freePort();
    // vLLM's OpenAI-compatible server and tool-calling quick starts, with the simulator's port and load time.
    const run = snoozeSim([
      "meta-llama/Llama-3.1-8B-Instruct",
      "--dtype",
      "auto",
      "--api-key",
      "token-abc123",
      "--enable-auto-tool-choice",
      "--tool-call-parser",
      "llama3_json",
      "--chat-template",
      "examples/tool_chat_template_llama3.1_json.jinja",
      "--tensor-parallel-size=1",
      "--gpu-memory-utilization",
      "0.85",
      "--port",
      String(port),
      "--load-time",
      "0",
    ]);
    await run.logged("listening");
    const openai = new OpenAI({
      baseURL: `http://127.0.0.1:${port}/v1`,
      apiKey: "token-abc123",
      maxRetries: 0,
    });
    const answer = await openai.chat.completions.create({
      model: "meta-llama/Llama-3.1-8B-Instruct",
      messages: [{ role: "user", content: "Hello!" }],
      max_tokens: 3,
    });
    expect(answer.choices[0]!.finish_reason).toBe("length");
    // --enable-auto-tool-choice with --tool-call-parser: tools are called, as vLLM's parser reads them.
    const tools = [
      {
        type: "function" as const,
        function: {
          name: "get_weather",
          parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
        },
      },
    ];
    const call = await openai.chat.completions.create({
      model: "meta-llama/Llama-3.1-8B-Instruct",
      messages: [{ role: "user", content: "Weather in Paris?" }],
      tools,
    });
    expect(call.choices[0]!.finish_reason).toBe("tool_calls");
    const toolCall = call.choices[0]!.message.tool_calls![0]!;
    expect(toolCall.type === "function" && toolCall.function.name).toBe("get_weather");
    expect(toolCall.type === "function" && typeof JSON.parse(toolCall.function.arguments).city).toBe(
      "string",
    );
    const notes = run
      .stderr()
      .split("\n")
      .filter((line) => line.includes('"msg":"vLLM flags without effect in the simulator"'));
    expect(notes).toHaveLength(1);
    expect(JSON.parse(notes[0]!).flags).toEqual([
      "--dtype auto",
      "--chat-template examples/tool_chat_template_llama3.1_json.jinja",
      "--tensor-parallel-size 1",
    ]);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("vLLM's human-readable --max-model-len (32k, auto) starts it, as it starts vLLM", async () => {
    // Found by a probe: `--max-model-len 32k`, which vLLM reads as 32000, exited 2 here.
    const port = await freePort();
    const run = snoozeSim(["org/m", "--max-model-len", "32k", "--port", String(port), "--load-time", "0"]);
    await run.logged("listening");
    const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: "none", maxRetries: 0 });
    const cards = (await openai.models.list()).data as unknown as { max_model_len: number }[];
    expect(cards.map((card) => card.max_model_len)).toEqual([32_000]);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
    const auto = snoozeSim(["org/m", "--max-model-len", "-1", "--port", String(port), "--load-time", "0"]);
    await auto.logged("listening");
    const models = (await openai.models.list()).data as unknown as { max_model_len: number }[];
    expect(models.map((card) => card.max_model_len)).toEqual([4096]);
    auto.child.kill("SIGTERM");
    expect(await auto.exited).toBe(0);
  });

  test("the simulated GPU is shared across processes: start and wake fail when it is full", async () => {
    const dir = tempDir();
    const gpu = [
      "--gpu-id",
      "0",
      "--gpu-memory",
      "24GiB",
      "--model-memory",
      "8GiB",
      "--gpu-memory-utilization",
      "0.6",
    ];
    const args = [
      "--served-model-name",
      "b",
      "--load-time",
      "0",
      "--time-scale",
      "0.01",
      "--gpu-dir",
      dir,
      ...gpu,
    ];
    // Engine a lives in this process, b in a `snooze sim` process: one device between them.
    const a = await sim({
      servedModelNames: ["a"],
      gpu: { id: "0", memoryBytes: 24 * 2 ** 30, modelBytes: 8 * 2 ** 30, dir },
      gpuMemoryUtilization: 0.6,
    });
    const portB = await freePort();

    const refused = snoozeSim([...args, "--port", String(portB)]);
    expect(await refused.exited).toBe(1);
    expect(refused.stderr()).toContain(
      "ValueError: Free memory on device cuda:0 (9.60 GiB/24.00 GiB) on startup",
    );
    expect(refused.stderr()).toContain(`a (pid ${process.pid}`);
    expect(await portOpen(portB)).toBe(false);

    expect((await post(a.url, "/sleep?level=1")).status).toBe(200);
    const b = snoozeSim([...args, "--port", String(portB)]);
    await b.logged("listening");
    const wake = await postJson(a.url, "/wake_up");
    expect(wake.status).toBe(500);
    expect(wake.json.error.message).toContain("CUDA Error: out of memory");
    expect(wake.json.error.message).toContain(`b (pid ${b.child.pid}`);

    // A holder killed without any cleanup: its claim counts for nothing.
    b.child.kill("SIGKILL");
    await b.exited;
    expect((await post(a.url, "/wake_up")).status).toBe(200);
    expect((await postJson(a.url, "/v1/completions", { prompt: "x", max_tokens: 1 })).status).toBe(200);
  });

  test("a named pipe in the simulated GPU's directory, as a claim or as its lock, never hangs a sim", async () => {
    // Found by an outside tester: a named pipe named like a claim hung `snooze sim` at start for
    // good, silent and deaf to SIGTERM; the default directory is under /tmp, where anyone may put one.
    const dir = tempDir();
    const device = path.join(dir, "gpu-0");
    mkdirSync(device);
    const claim = path.join(device, "claim-other.json");
    execFileSync("mkfifo", [claim]);
    const args = ["--served-model-name", "a", "--load-time", "0", "--gpu-dir", dir, "--gpu-id", "0"];
    const gpu = ["--gpu-memory", "24GiB", "--model-memory", "8GiB"];
    // A writer that comes and goes unblocks a reader stuck on a pipe, so a hang fails the test.
    const unblock = (pipe: string) => setTimeout(() => void open(pipe, "w").then((w) => w.close()), 15_000);
    let guard = unblock(claim);
    const started = snoozeSim([...args, ...gpu, "--port", String(await freePort())]);
    try {
      await started.logged("listening", 20_000);
    } finally {
      clearTimeout(guard);
    }
    expect(started.stderr()).not.toContain("error");
    started.child.kill("SIGTERM");
    expect(await started.exited).toBe(0);

    // A lock that is a named pipe is never taken for a stale one: the start gives up, saying so.
    rmSync(claim);
    const lock = path.join(device, ".lock");
    execFileSync("mkfifo", [lock]);
    guard = unblock(lock);
    const locked = snoozeSim([...args, ...gpu, "--port", String(await freePort())]);
    try {
      expect(await locked.exited).not.toBe(0);
    } finally {
      clearTimeout(guard);
    }
    expect(locked.stderr()).toContain(`simulated GPU lock ${lock} stayed taken`);
  }, 60_000);

  test("--fault-never-ready keeps the port closed; --fault-die-after exits 1", async () => {
    const [port, diesPort] = [await freePort(), await freePort()];
    const stuck = snoozeSim(["--port", String(port), "--load-time", "0", "--fault-never-ready"]);
    const dies = snoozeSim(["--port", String(diesPort), "--load-time", "0", "--fault-die-after", "1"]);
    await stuck.logged("loading");
    expect(await settlesWithin(stuck.logged("listening"), 200)).toBe(false);
    expect(await portOpen(port)).toBe(false);
    expect(stuck.child.exitCode).toBeNull();
    stuck.child.kill("SIGTERM");
    expect(await stuck.exited).toBe(0);

    await dies.logged("listening");
    expect(
      (await postJson(`http://127.0.0.1:${diesPort}`, "/v1/completions", { prompt: "x", max_tokens: 2 }))
        .status,
    ).toBe(200);
    expect(await dies.exited).toBe(1);
    expect(dies.stderr()).toContain("engine died: fault: died after 1 requests");
  });

  test("a SIGTERM while it starts (as soon as it says it is loading) is a clean stop, exit 0", async () => {
    const starting = snoozeSim(["--port", String(await freePort()), "--load-time", "5s"]);
    await starting.logged("loading");
    starting.child.kill("SIGTERM");
    expect(await starting.exited).toBe(0);
  });

  test("--engines runs independent engines on consecutive ports, GPU ids dealt round-robin", async () => {
    const base = await freePortRange(3);
    const run = snoozeSim(
      [
        "--engines",
        "3",
        "--base-port",
        String(base),
        "--load-time",
        "0",
        "--time-scale",
        "0.01",
        "--enable-sleep-mode",
        "--gpu-dir",
        tempDir(),
        "--gpu-id",
        "a,b",
        "--gpu-memory",
        "10GiB",
        "--model-memory",
        "1GiB",
        "--gpu-memory-utilization",
        "0.5",
      ],
      { VLLM_SERVER_DEV_MODE: "1" },
    );
    await run.logged("ready");
    const urls = [0, 1, 2].map((i) => `http://127.0.0.1:${base + i}`);
    for (const [i, url] of urls.entries()) {
      expect((await getJson(url, "/v1/models")).json.data[0].id).toBe(`sim-model-${i}`);
      const state = (await getJson(url, "/sim/state")).json;
      expect(state.gpu.id).toBe(i % 2 === 0 ? "a" : "b");
    }
    await post(urls[1]!, "/sleep");
    expect((await getJson(urls[1]!, "/is_sleeping")).json.is_sleeping).toBe(true);
    expect((await getJson(urls[0]!, "/is_sleeping")).json.is_sleeping).toBe(false);
    expect(
      (await postJson(urls[2]!, "/v1/chat/completions", chat("x", { model: "sim-model-2", max_tokens: 1 })))
        .status,
    ).toBe(200);
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("started by npm (npx snooze sim), it stops when its parent exits, as snooze serve does", {
    timeout: 30_000,
  }, async () => {
    // Found by a docs walk: a SIGTERM to `npx snooze sim`, which npm does not pass on, left the
    // simulator serving its port, its parent gone, for good.
    const log = path.join(tempDir(), "sim.log");
    const script = `"${node}" bin/snooze.js sim --port 0 --load-time 1ms </dev/null >/dev/null 2>"${log}" & pid=$!
for i in $(seq 150); do grep -q '"msg":"ready"' "${log}" && break; sleep 0.1; done
echo $pid`;
    const parent = spawn("sh", ["-c", script], {
      stdio: ["ignore", "pipe", "ignore"],
      env: { ...process.env, npm_command: "exec", SNOOZE_LOG_LEVEL: "info" },
    });
    let out = "";
    parent.stdout!.on("data", (chunk) => (out += chunk));
    await new Promise((resolve) => parent.once("close", resolve));
    const pid = Number(out.trim());
    expect(pid).toBeGreaterThan(1);
    const alive = () => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    try {
      for (let i = 0; i < 100 && alive(); i++) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(alive()).toBe(false);
      expect(readFileSync(log, "utf8")).toContain("the parent process exited; shutting down");
    } finally {
      if (alive()) process.kill(pid, "SIGKILL");
    }
  });
});
