/**
 * llama-swap, the peer: the proxy most people with a few GPUs and many models run today. It is
 * built from a source checkout named by BENCH_LLAMA_SWAP (`go build`, once per commit, kept in
 * the user's cache directory) and run on the same engines as the other targets; without a
 * checkout every scenario leaves it out and the report says so.
 *
 * Its configuration is its defaults except for three settings a benchmark needs: a
 * concurrency limit the load fits under (its default of 10 in-flight requests per model answers
 * the rest with 429), no logging to stdout (nginx runs without an access log too), and models
 * that are never unloaded (`ttl: 0`).
 */
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { homedir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import type { BenchContext } from "./context.ts";
import { freePort } from "./ports.ts";
import { startServerProcess } from "./server-process.ts";

export interface LlamaSwapModel {
  /** The engine's argv; llama-swap starts it on the model's first request. */
  cmd: readonly string[];
  /** Where the engine listens, e.g. http://127.0.0.1:8001 (llama-swap polls its /health). */
  proxy: string;
}

export interface LlamaSwapPeer {
  binary: string;
  /** The checkout's commit, for the report. */
  version: string;
}

export interface RunningLlamaSwap {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

const snoozeBin = fileURLToPath(new URL("../../bin/snooze.js", import.meta.url));

/** A `snooze sim` engine serving `model` on `port`, with `flags`, as llama-swap starts it. */
export function simModel(
  model: string,
  port: number | string,
  flags: readonly string[] = [],
): LlamaSwapModel {
  return {
    cmd: [process.execPath, snoozeBin, "sim", "--served-model-name", model, "--port", String(port), ...flags],
    proxy: `http://127.0.0.1:${port}`,
  };
}

/** Concurrency limit per model: above every load the scenarios offer (1,000 streams, 10,000 held). */
const concurrencyLimit = 100_000;

let built: LlamaSwapPeer | undefined;

/** The peer named by BENCH_LLAMA_SWAP, built if this commit has not been; undefined without one. */
export function llamaSwapPeer(ctx: BenchContext): LlamaSwapPeer | undefined {
  const checkout = process.env.BENCH_LLAMA_SWAP;
  if (!checkout) return undefined;
  if (built) return built;
  if (!existsSync(join(checkout, "go.mod")))
    throw new Error(`BENCH_LLAMA_SWAP=${checkout} is not a llama-swap source checkout (no go.mod)`);
  const git = (...args: string[]) =>
    execFileSync("git", ["-C", checkout, ...args], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  let version = "unknown";
  let dirty = true;
  try {
    version = git("rev-parse", "--short", "HEAD");
    dirty = git("status", "--porcelain", "--untracked-files=no") !== "";
  } catch {}
  const cache = join(process.env.XDG_CACHE_HOME || join(homedir(), ".cache"), "snooze-bench");
  // A checkout with local edits gets a binary of its own, so it never stands in for the commit.
  const binary = join(cache, `llama-swap-${version}${dirty ? "-local" : ""}`);
  // A checkout with local edits is rebuilt every run: its commit does not say what it holds.
  if (dirty || !existsSync(binary)) {
    mkdirSync(cache, { recursive: true });
    ctx.log(`building llama-swap ${version}${dirty ? " (with local changes)" : ""} from ${checkout}`);
    const partial = `${binary}.partial`;
    try {
      execFileSync("go", ["build", "-o", partial, "."], {
        cwd: checkout,
        stdio: ["ignore", "inherit", "inherit"],
      });
    } catch (error) {
      throw new Error(
        (error as { code?: string }).code === "ENOENT"
          ? "BENCH_LLAMA_SWAP needs Go to build llama-swap, and `go` is not on the PATH"
          : `building llama-swap in ${checkout} failed: ${(error as Error).message}`,
      );
    }
    renameSync(partial, binary);
  }
  built = { binary, version: dirty ? `${version} with local changes` : version };
  return built;
}

/** A POSIX shell word llama-swap's command splitter reads back as `arg`. */
function shellWord(arg: string): string {
  return `'${arg.replaceAll("'", `'\\''`)}'`;
}

/** `healthCheckTimeoutS`: how long a start may take before llama-swap fails the waiting requests. */
export function llamaSwapConfig(models: Record<string, LlamaSwapModel>, healthCheckTimeoutS = 60): string {
  const lines = [
    "logLevel: warn",
    "logToStdout: none",
    `healthCheckTimeout: ${healthCheckTimeoutS}`,
    "models:",
  ];
  for (const [name, model] of Object.entries(models)) {
    lines.push(
      `  ${JSON.stringify(name)}:`,
      `    cmd: ${JSON.stringify(model.cmd.map(shellWord).join(" "))}`,
      `    proxy: ${JSON.stringify(model.proxy)}`,
      "    checkEndpoint: /health",
      "    ttl: 0",
      `    concurrencyLimit: ${concurrencyLimit}`,
    );
  }
  return `${lines.join("\n")}\n`;
}

/** Writes the config into `<ctx.dir>/<name>` and runs llama-swap on a free loopback port. */
export async function startLlamaSwap(
  ctx: BenchContext,
  peer: LlamaSwapPeer,
  name: string,
  models: Record<string, LlamaSwapModel>,
  healthCheckTimeoutS?: number,
): Promise<RunningLlamaSwap> {
  const dir = join(ctx.dir, name);
  mkdirSync(dir, { recursive: true });
  const config = join(dir, "llama-swap.yaml");
  writeFileSync(config, llamaSwapConfig(models, healthCheckTimeoutS));
  const port = await freePort();
  const server = await startServerProcess(
    [peer.binary, "--config", config, "--listen", `127.0.0.1:${port}`],
    port,
  );
  return { url: `http://127.0.0.1:${port}`, pid: server.pid, stop: () => server.stop() };
}
