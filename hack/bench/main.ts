/**
 * `npm run bench`: the activator side by side with a direct connection and
 * nginx, on this machine, in one run; rewrites the results section of
 * docs/benchmarks.md. See that file for what each scenario measures.
 *
 *   [BENCH_LLAMA_SWAP=<llama-swap checkout>] npm run bench [-- --quick | --tiny] [--only warm-path,activation,streaming,memory,idle-rss,swap]
 *                 [--profile <dir>] [--no-write | --write] [--out <file>]
 *
 * --quick is a smoke run of the harness (seconds per scenario, small counts);
 * --tiny is smaller still (a few seconds per scenario: the harness's own test, hack/bench/bench.test.ts).
 * They and --only do not touch the docs unless --write is given.
 * BENCH_LLAMA_SWAP adds the peer, built from that source checkout (hack/bench/llama-swap.ts);
 * without it the report says it was not run.
 */
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { activation } from "./activation.ts";
import type { BenchContext } from "./context.ts";
import { idleRss } from "./idle-rss.ts";
import { llamaSwapPeer } from "./llama-swap.ts";
import { machineFacts } from "./machine.ts";
import { memory } from "./memory.ts";
import { type BenchResults, renderResults, sectionName } from "./report.ts";
import { writeSection } from "./slots/docs-section.ts";
import { formatMarkdown } from "./slots/format-markdown.ts";
import { streamCounts, streaming } from "./streaming.ts";
import { swap } from "./swap.ts";
import { warmPath } from "./warm-path.ts";

const scenarios = ["warm-path", "activation", "streaming", "memory", "idle-rss", "swap"] as const;
type Scenario = (typeof scenarios)[number];
const repo = fileURLToPath(new URL("../..", import.meta.url));
/** No run may hang: every scenario is bounded, and so is the whole. */
const overallLimitMs = 30 * 60_000;

function codeVersion(): string {
  try {
    const git = (...args: string[]) =>
      execFileSync("git", ["-C", repo, ...args], {
        encoding: "utf8",
        stdio: ["ignore", "pipe", "ignore"],
      }).trim();
    const commit = git("rev-parse", "--short", "HEAD");
    const dirty = git("status", "--porcelain", "--", "activator", "autoscaler", "lib", "cli");
    return dirty ? `${commit} with uncommitted changes in activator/, autoscaler/, lib/ or cli/` : commit;
  } catch {
    return "unknown";
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({
    options: {
      quick: { type: "boolean", default: false },
      tiny: { type: "boolean", default: false },
      only: { type: "string" },
      profile: { type: "string" },
      write: { type: "boolean" },
      "no-write": { type: "boolean" },
      out: { type: "string", default: join(repo, "docs", "benchmarks.md") },
    },
  });
  const only = values.only ? (values.only.split(",") as Scenario[]) : [...scenarios];
  const unknown = only.filter((name) => !scenarios.includes(name));
  if (unknown.length) {
    console.error(`bench: unknown scenario ${unknown.join(", ")}; known: ${scenarios.join(", ")}`);
    return 2;
  }
  const quick = values.quick || values.tiny;
  const write = values["no-write"] ? false : (values.write ?? (!quick && !values.only));

  execFileSync("bash", [join(repo, "hack", "bench", "install-tools.sh")], { stdio: "inherit" });
  const machine = machineFacts();
  const dir = mkdtempSync(join(tmpdir(), "snooze-bench-"));
  const started = performance.now();
  const ctx: BenchContext = {
    dir,
    quick,
    tiny: values.tiny,
    profileDir: values.profile,
    log: (message) =>
      console.error(`[bench ${((performance.now() - started) / 1000).toFixed(0)}s] ${message}`),
  };
  const argv = process.argv.slice(2);
  // Built before the first scenario, so a build failure stops the run before any measurement.
  const peer = llamaSwapPeer(ctx);
  const results: BenchResults = {
    command: `${peer ? "BENCH_LLAMA_SWAP=<llama-swap checkout> " : ""}npm run bench${argv.length ? ` -- ${argv.join(" ")}` : ""}`,
    quick,
    code: codeVersion(),
    machine,
    llamaSwap: peer?.version,
    seconds: 0,
  };
  try {
    if (only.includes("warm-path")) results.warmPath = await warmPath(ctx);
    if (only.includes("activation")) results.activation = await activation(ctx);
    if (only.includes("streaming")) {
      results.streaming = [];
      for (const streams of streamCounts(ctx)) results.streaming.push(await streaming(ctx, streams));
    }
    if (only.includes("memory")) results.memory = await memory(ctx);
    if (only.includes("idle-rss")) results.idleRss = await idleRss(ctx);
    if (only.includes("swap")) results.swap = await swap(ctx);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  results.seconds = (performance.now() - started) / 1000;
  const markdown = formatMarkdown(renderResults(results));
  console.log(markdown);
  if (write) {
    await writeSection(values.out, sectionName, markdown, "Benchmarks");
    console.error(`bench: results written to ${values.out}`);
  }
  return 0;
}

const limit = setTimeout(() => {
  console.error(`bench: still running after ${overallLimitMs / 60_000} min; giving up`);
  process.exit(1);
}, overallLimitMs);
limit.unref();
main().then(
  (code) => {
    process.exitCode = code;
    // Load-generator and engine children are gone by now; do not wait for stray handles.
    setImmediate(() => process.exit(code));
  },
  (error: Error) => {
    console.error(`bench: failed: ${error.stack ?? error.message}`);
    process.exit(1);
  },
);
