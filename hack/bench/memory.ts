/**
 * Memory per held request: requests for a model whose engine never comes up
 * (`snooze sim --fault-never-ready`: the process runs, its port never opens)
 * are held for their whole budget. For N held requests the activator
 * process's memory after a forced full GC (node --expose-gc; RSS after a
 * memory-reducing one, which also shrinks the young generation) is compared with
 * before: once against the state with the N client connections already open
 * and idle (the held request alone), once against the state before they were
 * opened (the request with its connection: what a client really costs).
 * A first pass holds a few hundred and lets them go, so lazily built code and
 * pools are not billed to the first N.
 *
 * BENCH_HELD=1000,10000 sets the counts. BENCH_BASELINE=<dir> names another checkout (e.g. a
 * `git worktree` of the previous commit, with node_modules): its activator is measured beside this
 * one's, count by count, in the same run, which is how a change's effect is recorded.
 *
 * BENCH_LLAMA_SWAP adds the peer holding the same requests for the same never-ready engine (its
 * wait for the engine's health). A Go process cannot be told to collect from outside, so its
 * figures are plain RSS, read once it has read every request (its sockets' receive queues empty)
 * and its RSS has settled; there is no heap column for it.
 */
import { join } from "node:path";
import { type ActivatorProcess, startActivator } from "./activator.ts";
import { forkClient } from "./child.ts";
import type { BurstCommand } from "./clients/burst.ts";
import { type BenchContext, rotate, until, writeSnoozeYaml, yamlArgv } from "./context.ts";
import { type LlamaSwapPeer, llamaSwapPeer, simModel, startLlamaSwap } from "./llama-swap.ts";
import { freePort } from "./ports.ts";
import { receiveQueues, rssBytes } from "./proc.ts";

export interface MemoryStep {
  /** Which checkout's activator: "this", or "baseline" (BENCH_BASELINE). */
  build: string;
  held: number;
  /** Bytes per held request, request alone (against open idle connections). */
  heapPerRequest: number;
  externalPerRequest: number;
  rssPerRequest: number;
  /** Bytes per held request including its connection. */
  heapPerConnection: number;
  externalPerConnection: number;
  rssPerConnection: number;
}

export interface MemoryResult {
  steps: MemoryStep[];
}

const request = JSON.stringify({
  model: "bench",
  messages: [{ role: "user", content: "Hold this for me." }],
  max_tokens: 16,
});

type Usage = NodeJS.MemoryUsage;

const external = (m: Usage) => m.external + m.arrayBuffers;

async function holdMany(
  activator: ActivatorProcess,
  build: string,
  count: number,
  measure: boolean,
): Promise<MemoryStep> {
  const before = await activator.memory();
  const client = await forkClient<BurstCommand>("./clients/burst.ts", {
    origin: activator.url,
    path: "/v1/chat/completions",
    healthPath: "/healthz",
    body: request,
    count,
    timeoutMs: 300_000,
  });
  try {
    const { connected } = await client.ask<{ connected: number }>({ cmd: "connect" });
    if (connected < count) throw new Error(`only ${connected} of ${count} connections opened`);
    const connectedUsage = measure ? await activator.memory() : before;
    await client.ask({ cmd: "fire" });
    await until(
      async () => (await activator.route("bench")).held >= count,
      60_000,
      `${count} held requests (held: ${(await activator.route("bench")).held})`,
    );
    const heldUsage = measure ? await activator.memory() : before;
    // Heap after regular collections; RSS after the memory-reducing one (see activator-process.ts:
    // after a regular one RSS follows the young generation, which the burst of arrivals grew).
    const held = heldUsage.regular;
    const open = connectedUsage.regular;
    const start = before.regular;
    return {
      build,
      held: count,
      heapPerRequest: (held.heapUsed - open.heapUsed) / count,
      externalPerRequest: (external(held) - external(open)) / count,
      rssPerRequest: (heldUsage.reduced.rss - connectedUsage.reduced.rss) / count,
      heapPerConnection: (held.heapUsed - start.heapUsed) / count,
      externalPerConnection: (external(held) - external(start)) / count,
      rssPerConnection: (heldUsage.reduced.rss - before.reduced.rss) / count,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
    await until(async () => (await activator.route("bench")).held === 0, 30_000, "held requests to leave");
  }
}

/** Bytes not yet read by the process listening on `port`, summed over its established connections. */
function unread(port: number): { connections: number; bytes: number } {
  const queues = receiveQueues(port, "established");
  return { connections: queues.length, bytes: queues.reduce((sum, bytes) => sum + bytes, 0) };
}

/** llama-swap holding `count` requests for an engine that never comes up: its RSS per request. */
async function llamaSwapHolds(ctx: BenchContext, peer: LlamaSwapPeer, count: number): Promise<MemoryStep> {
  const port = await freePort();
  const llamaSwap = await startLlamaSwap(
    ctx,
    peer,
    `memory-llama-swap-${count}`,
    { bench: simModel("bench", port, ["--fault-never-ready"]) },
    600,
  );
  const settled = async () => {
    let last = rssBytes(llamaSwap.pid);
    for (let i = 0; i < 20; i++) {
      await new Promise((resolve) => setTimeout(resolve, 500));
      const now = rssBytes(llamaSwap.pid);
      if (Math.abs(now - last) < 256 * 1024) return now;
      last = now;
    }
    return last;
  };
  const client = await forkClient<BurstCommand>("./clients/burst.ts", {
    origin: llamaSwap.url,
    path: "/v1/chat/completions",
    healthPath: "/health",
    body: request,
    count,
    timeoutMs: 300_000,
  });
  try {
    const before = await settled();
    const { connected } = await client.ask<{ connected: number }>({ cmd: "connect" });
    if (connected < count) throw new Error(`only ${connected} of ${count} connections opened`);
    const open = await settled();
    await client.ask({ cmd: "fire" });
    const listenPort = Number(new URL(llamaSwap.url).port);
    await until(
      () => {
        const u = unread(listenPort);
        return u.connections >= count && u.bytes === 0;
      },
      60_000,
      `llama-swap to read ${count} requests`,
    );
    const held = await settled();
    const nan = Number.NaN;
    return {
      build: "llama-swap",
      held: count,
      heapPerRequest: nan,
      externalPerRequest: nan,
      rssPerRequest: (held - open) / count,
      heapPerConnection: nan,
      externalPerConnection: nan,
      rssPerConnection: (held - before) / count,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
    await llamaSwap.stop();
  }
}

export async function memory(ctx: BenchContext): Promise<MemoryResult> {
  const fromEnv = (process.env.BENCH_HELD ?? "")
    .split(",")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  const counts = fromEnv.length ? fromEnv : ctx.tiny ? [50] : ctx.quick ? [500] : [1_000, 10_000];
  const config = writeSnoozeYaml(
    ctx,
    "memory",
    `models:
  bench:
    holdBudget: 30m
    startTimeout: 30m
    queueDepth: 20000
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}", "--fault-never-ready"])}
`,
  );
  const baseline = process.env.BENCH_BASELINE;
  const builds = [
    ...(baseline ? [{ name: "baseline", script: join(baseline, "hack/bench/activator-process.ts") }] : []),
    { name: "this", script: undefined },
  ];
  const activators: { name: string; activator: ActivatorProcess }[] = [];
  try {
    for (const build of builds) {
      const activator = await startActivator(config, {
        script: build.script,
        cpuProfileDir: ctx.profileDir ? join(ctx.profileDir, `memory-${build.name}`) : undefined,
      });
      activators.push({ name: build.name, activator });
      await holdMany(activator, build.name, ctx.tiny ? 20 : 300, false);
    }
    const steps: MemoryStep[] = [];
    for (const [round, count] of counts.entries()) {
      for (const { name, activator } of rotate(activators, round)) {
        const step = await holdMany(activator, name, count, true);
        ctx.log(
          `memory (${name}): ${count} held: ${(step.heapPerRequest / 1024).toFixed(1)} KiB heap + ` +
            `${(step.externalPerRequest / 1024).toFixed(1)} KiB external per request, ` +
            `RSS ${(step.rssPerRequest / 1024).toFixed(1)} KiB per request, ` +
            `${(step.rssPerConnection / 1024).toFixed(1)} KiB with its connection`,
        );
        steps.push(step);
      }
    }
    const peer = llamaSwapPeer(ctx);
    for (const count of peer ? counts : []) {
      const step = await llamaSwapHolds(ctx, peer!, count);
      ctx.log(
        `memory (llama-swap): ${count} held: RSS ${(step.rssPerRequest / 1024).toFixed(1)} KiB per request, ` +
          `${(step.rssPerConnection / 1024).toFixed(1)} KiB with its connection`,
      );
      steps.push(step);
    }
    return { steps };
  } finally {
    await Promise.all(activators.map(({ activator }) => activator.close()));
  }
}
