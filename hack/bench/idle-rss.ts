/**
 * Idle memory: the resident set of a `snooze sim` engine and of `snooze serve` (with a few models
 * and with many) after start-up, side by side in the same rounds with a bare Node (`node -e`, with
 * and without an HTTP server listening), so the figures say what Snooze's own code costs on top of
 * the runtime. RSS counts the node binary's pages, which every engine running the same binary
 * shares; the anonymous part (RssAnon) is what each more process really adds.
 *
 * Rounds use a compile cache directory of their own: the first round fills it (what the very first
 * run after an install or an edit costs, the type stripper included), the later rounds are what
 * every run after that costs. With BENCH_LLAMA_SWAP the peer is measured with the same models
 * (a Go binary: no compile cache, so its first run is no different). With BENCH_BASELINE (another
 * checkout, e.g. a worktree of the previous commit) its `snooze serve` with the same 3 models runs
 * in the same rounds, so a change's idle cost is read side by side:
 *   BENCH_BASELINE=<checkout> npm run bench -- --only idle-rss --no-write
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { type BenchContext, rotate, writeSnoozeYaml, yamlArgv } from "./context.ts";
import { llamaSwapConfig, llamaSwapPeer, simModel } from "./llama-swap.ts";
import { freePort } from "./ports.ts";
import { anonRssBytes, rssBytes } from "./proc.ts";
import { startServerProcess } from "./server-process.ts";
import { median } from "./stats.ts";

export interface IdleRssRow {
  target: string;
  /** Median over the rounds after the first, bytes. */
  rss: number;
  anon: number;
  /** The first round (empty compile cache), bytes. */
  firstRss: number;
}

export interface IdleRssResult {
  rounds: number;
  settleMs: number;
  manyModels: number;
  rows: IdleRssRow[];
}

const snooze = fileURLToPath(new URL("../../bin/snooze.js", import.meta.url));

function residentOf(pid: number): { rss: number; anon: number } {
  return { rss: rssBytes(pid), anon: anonRssBytes(pid) };
}

/** A snooze.yaml with `count` models whose engines are never started (no request comes). */
function serveConfig(ctx: BenchContext, count: number): string {
  const models = Array.from(
    { length: count },
    (_, i) => `  m${i}:
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}"])}
`,
  ).join("");
  return writeSnoozeYaml(ctx, `idle-rss-${count}`, `models:\n${models}`);
}

/** The same models for llama-swap: `snooze sim` engines it would start on a first request. */
function llamaSwapModels(ctx: BenchContext, count: number): string {
  const file = join(ctx.dir, `idle-rss-${count}`, "llama-swap.yaml");
  const models = Object.fromEntries(
    Array.from({ length: count }, (_, i) => [`m${i}`, simModel(`m${i}`, "${PORT}")]),
  );
  writeFileSync(file, llamaSwapConfig(models));
  return file;
}

export async function idleRss(ctx: BenchContext): Promise<IdleRssResult> {
  const rounds = ctx.tiny ? 2 : ctx.quick ? 3 : 6;
  const settleMs = ctx.tiny ? 300 : 2_000;
  const manyModels = ctx.tiny ? 5 : 50;
  const cache = join(ctx.dir, "idle-rss-compile-cache");
  mkdirSync(cache, { recursive: true });
  const few = serveConfig(ctx, 3);
  const many = serveConfig(ctx, manyModels);
  const node = process.execPath;
  const peer = llamaSwapPeer(ctx);
  const targets: { name: string; argv: (port: number) => string[] }[] = [
    {
      name: "node -e (idle)",
      argv: (port) => [node, "-e", `require("net").createServer().listen(${port}, "127.0.0.1")`],
    },
    {
      name: "node -e (HTTP server)",
      argv: (port) => [
        node,
        "-e",
        `require("http").createServer((q, s) => s.end()).listen(${port}, "127.0.0.1")`,
      ],
    },
    { name: "snooze sim", argv: (port) => [node, snooze, "sim", "--port", String(port)] },
    {
      name: "snooze serve (3 models)",
      argv: (port) => [node, snooze, "serve", "--config", few, "--port", String(port)],
    },
    ...(process.env.BENCH_BASELINE
      ? [
          {
            name: "snooze serve (3 models), baseline",
            argv: (port: number) => [
              node,
              join(process.env.BENCH_BASELINE!, "bin/snooze.js"),
              "serve",
              "--config",
              few,
              "--port",
              String(port),
            ],
          },
        ]
      : []),
    {
      name: `snooze serve (${manyModels} models)`,
      argv: (port) => [node, snooze, "serve", "--config", many, "--port", String(port)],
    },
    ...(peer
      ? [3, manyModels].map((count) => {
          const config = llamaSwapModels(ctx, count);
          return {
            name: `llama-swap (${count} models)`,
            argv: (port: number) => [peer.binary, "--config", config, "--listen", `127.0.0.1:${port}`],
          };
        })
      : []),
  ];
  const samples = new Map<string, { rss: number; anon: number }[]>(targets.map((t) => [t.name, []]));
  for (let round = 0; round < rounds; round++) {
    // The first round runs in the listed order so each command fills the cache before it is timed again.
    for (const target of round === 0 ? targets : rotate(targets, round)) {
      const port = await freePort();
      const server = await startServerProcess(target.argv(port), port, {
        NODE_COMPILE_CACHE: cache,
        SNOOZE_LOG_LEVEL: "error",
      });
      try {
        await new Promise((resolve) => setTimeout(resolve, settleMs));
        samples.get(target.name)!.push(residentOf(server.pid));
      } finally {
        await server.stop();
      }
    }
  }
  const rows = targets.map(({ name }) => {
    const [first, ...rest] = samples.get(name)!;
    return {
      target: name,
      rss: median(rest.map((s) => s.rss)),
      anon: median(rest.map((s) => s.anon)),
      firstRss: first!.rss,
    };
  });
  for (const row of rows)
    ctx.log(
      `idle-rss: ${row.target}: ${(row.rss / 2 ** 20).toFixed(1)} MiB (anon ${(row.anon / 2 ** 20).toFixed(1)})`,
    );
  return { rounds, settleMs, manyModels, rows };
}
