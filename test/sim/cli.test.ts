/**
 * `snooze sim` as real processes: what the local platform and `npm start` run.
 */
import { type ChildProcess, spawn } from "node:child_process";
import * as path from "node:path";
import { afterEach, describe, expect, test } from "vitest";
import {
  chat,
  freePort,
  getJson,
  portOpen,
  post,
  postJson,
  SseStream,
  settlesWithin,
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
    // Three processes at once: each costs a Node start-up.
    const help = snoozeSim(["--help"]);
    const badDuration = snoozeSim(["--load-time", "soon"]);
    const unknown = snoozeSim(["--gpu-count", "2"]);
    let out = "";
    help.child.stdout!.on("data", (chunk: Buffer) => {
      out += chunk;
    });
    expect(await help.exited).toBe(0);
    for (const flag of [
      "--served-model-name",
      "--enable-sleep-mode",
      "--max-num-seqs",
      "--load-time",
      "--ttft",
      "--itl",
    ]) {
      expect(out).toContain(flag);
    }
    for (const flag of [
      "--gpu-id",
      "--gpu-memory",
      "--model-memory",
      "--time-scale",
      "--engines",
      "--base-port",
    ]) {
      expect(out).toContain(flag);
    }
    expect(out).toContain("--fault-never-ready");

    expect(await badDuration.exited).toBe(2);
    expect(badDuration.stderr()).toContain('--load-time: "soon" is not a duration');
    expect(await unknown.exited).toBe(2);
    expect(unknown.stderr()).toContain("--gpu-count");
  });

  test("the port opens after --load-time; SIGTERM lets an in-flight stream finish, then exits 0", async () => {
    const port = await freePort();
    const run = snoozeSim(["--port", String(port), "--load-time", "400ms", "--itl", "20ms"]);
    await run.logged("loading");
    const loadingSince = performance.now();
    expect(await portOpen(port)).toBe(false);
    await run.logged("listening");
    expect(performance.now() - loadingSince).toBeGreaterThanOrEqual(300);
    const url = `http://127.0.0.1:${port}`;
    expect((await fetch(`${url}/health`)).status).toBe(200);
    expect((await getJson(url, "/v1/models")).json.data[0].id).toBe("sim-model");

    const stream = new SseStream(
      await post(url, "/v1/chat/completions", chat("x", { max_tokens: 10, stream: true })),
    );
    await stream.until((s) => s.tokens >= 1);
    run.child.kill("SIGTERM");
    expect((await stream.rest()).at(-1)).toBe("[DONE]");
    expect(stream.finishReason).toBe("length");
    expect(await run.exited).toBe(0);
  });

  test("vLLM's invocation: positional model, several served names, sleep mode from the environment", async () => {
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
        "0",
        "--max-model-len",
        "1024",
      ],
      { VLLM_SERVER_DEV_MODE: "1" },
    );
    await run.logged("listening");
    const url = `http://127.0.0.1:${port}`;
    const models = (await getJson(url, "/v1/models")).json.data;
    expect(models.map((m: any) => [m.id, m.root, m.max_model_len])).toEqual([
      ["qwen", "org/model-7b", 1024],
      ["qwen-alias", "org/model-7b", 1024],
    ]);
    expect((await post(url, "/sleep?level=1")).status).toBe(200);
    expect((await getJson(url, "/is_sleeping")).json).toEqual({ is_sleeping: true });
    run.child.kill("SIGTERM");
    expect(await run.exited).toBe(0);
  });

  test("the simulated GPU is shared by two processes: start and wake fail when it is full", async () => {
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
    const common = [
      "--enable-sleep-mode",
      "--load-time",
      "0",
      "--time-scale",
      "0.01",
      "--gpu-dir",
      dir,
      ...gpu,
    ];
    const env = { VLLM_SERVER_DEV_MODE: "1" };
    const [portA, portB] = [await freePort(), await freePort()];
    const a = snoozeSim(["--served-model-name", "a", "--port", String(portA), ...common], env);
    await a.logged("listening");
    const urlA = `http://127.0.0.1:${portA}`;

    const refused = snoozeSim(["--served-model-name", "b", "--port", String(portB), ...common], env);
    expect(await refused.exited).toBe(1);
    expect(refused.stderr()).toContain(
      "ValueError: Free memory on device cuda:0 (9.60 GiB/24.00 GiB) on startup",
    );
    expect(await portOpen(portB)).toBe(false);

    expect((await post(urlA, "/sleep?level=1")).status).toBe(200);
    const b = snoozeSim(["--served-model-name", "b", "--port", String(portB), ...common], env);
    await b.logged("listening");
    const wake = await postJson(urlA, "/wake_up");
    expect(wake.status).toBe(500);
    expect(wake.json.error.message).toContain("CUDA Error: out of memory");

    // A holder killed without cleanup: its claim is ignored.
    b.child.kill("SIGKILL");
    await b.exited;
    expect((await post(urlA, "/wake_up")).status).toBe(200);
    expect((await postJson(urlA, "/v1/completions", { prompt: "x", max_tokens: 1 })).status).toBe(200);
  });

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

  test("--engines runs independent engines on consecutive ports, GPU ids dealt round-robin", async () => {
    const base = await freePort();
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
});
