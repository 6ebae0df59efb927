/**
 * Warm path: a model that is ready. The same wrk load goes, in the same round,
 * straight to the engine (the physical limit), through nginx with one worker
 * (one process, like the activator), through nginx with a worker per core, and
 * through Node relaying bytes with no HTTP (`node-relay.ts`: the floor of any
 * Node proxy), through Node with HTTP's framing written by hand on raw sockets
 * (`framed-proxy.ts`: what a Node data plane off node:http could reach at most), through a
 * minimal Node.js proxy (`minimal-proxy.ts`: what Node's HTTP costs), the same proxy as two processes behind one port (what spreading
 * Node over the cores buys), and through the activator. The engine is nginx answering a fixed chat
 * completion: the cheapest HTTP server on the machine, so that what differs
 * between the targets is the proxy.
 *
 * - latency: 1 connection, one request at a time: p50/p99; "added" is the
 *   target's p50/p99 minus the direct one of the same round.
 * - throughput: 64 connections: requests/s, and the proxy's CPU per request
 *   (from /proc, nginx's master + workers summed).
 *
 * BENCH_BASELINE=<dir> names another checkout (e.g. a worktree of the previous commit): its
 * activator runs beside this one's as the target `activator-baseline`, on an engine of its own,
 * so a change to the request path is measured A/B within the same rounds.
 *
 * BENCH_LLAMA_SWAP=<checkout> adds the peer (`llama-swap.ts`) as the target `llama-swap`, in
 * front of an engine of its own that it starts itself on the first request.
 */
import { join } from "node:path";
import { startActivator } from "./activator.ts";
import type { GcPauses } from "./activator-protocol.ts";
import { type BenchContext, postJson, rotate, writeSnoozeYaml, yamlArgv } from "./context.ts";
import { llamaSwapPeer, startLlamaSwap } from "./llama-swap.ts";
import { nginxCommand, nginxProxyConfig, nginxStaticConfig, startNginx } from "./nginx.ts";
import { freePort } from "./ports.ts";
import { childrenOf, cpuMeter } from "./proc.ts";
import { startNodeProxy } from "./server-process.ts";
import { medianOf } from "./stats.ts";
import { runWrk, type WrkResult } from "./wrk.ts";

export const warmPathTargets = [
  "direct",
  "nginx-1w",
  "nginx-auto",
  "node-relay",
  "node-framed",
  "node-minimal",
  "node-minimal-2p",
  "activator",
] as const;
export type WarmPathTarget = (typeof warmPathTargets)[number] | "activator-baseline" | "llama-swap";

export const chatRequest = JSON.stringify({
  model: "bench",
  messages: [{ role: "user", content: "Say hello in one short sentence." }],
  max_tokens: 16,
});

/** A chat completion the size and shape of vLLM's. */
export const chatAnswer = JSON.stringify({
  id: "chatcmpl-3b1f0c9e8d7a4b2c9f1e0d8c7b6a5f4e",
  object: "chat.completion",
  created: 1_700_000_000,
  model: "bench",
  choices: [
    {
      index: 0,
      message: {
        role: "assistant",
        content: "Hello there, it is nice to meet you today!",
        refusal: null,
        annotations: null,
        audio: null,
        function_call: null,
        tool_calls: [],
        reasoning: null,
      },
      logprobs: null,
      finish_reason: "stop",
      stop_reason: null,
      token_ids: null,
    },
  ],
  service_tier: null,
  system_fingerprint: null,
  usage: { prompt_tokens: 18, total_tokens: 29, completion_tokens: 11, prompt_tokens_details: null },
  prompt_logprobs: null,
  prompt_token_ids: null,
  kv_transfer_params: null,
});

export interface WarmPathRound {
  latency: Record<WarmPathTarget, WrkResult>;
  /** gcMs: the garbage collector's pauses of the process's main thread over the run (activators only). */
  throughput: Record<WarmPathTarget, WrkResult & { cpuSeconds: number; gcMs?: number }>;
}

export interface WarmPathSummary {
  target: WarmPathTarget;
  p50Us: number;
  p99Us: number;
  addedP50Us: number;
  addedP99Us: number;
  requestsPerSecond: number;
  cpuUsPerRequest: number;
  /** The activators': their main thread's garbage-collection pauses per request under load. */
  gcPauseUsPerRequest?: number;
  errors: number;
}

export interface WarmPathResult {
  rounds: number;
  latencySeconds: number;
  throughputSeconds: number;
  throughputConnections: number;
  summaries: WarmPathSummary[];
  /** Activator requests/s over nginx-1w's (and the others'), median of the per-round ratios. */
  throughputVsNginx1: number;
  throughputVsNginxAuto: number;
  throughputVsNodeMinimal: number;
  /**
   * What Node itself reaches over nginx-1w, without Snooze: bytes relayed with no HTTP (`node-relay`),
   * HTTP framed by hand on raw sockets (`node-framed`) and node:http + undici (`node-minimal`),
   * medians of the per-round ratios of requests/s.
   */
  nodeVsNginx1: { relay: number; framed: number; minimal: number };
  /** With BENCH_LLAMA_SWAP: activator requests/s over llama-swap's, median of the per-round ratios. */
  throughputVsLlamaSwap?: number;
  /** With BENCH_BASELINE: this activator over the baseline's, medians of the per-round ratios. */
  vsBaseline?: { requestsPerSecond: number; cpuPerRequest: number; addedP50Us: number };
}

export async function warmPath(ctx: BenchContext): Promise<WarmPathResult> {
  const rounds = ctx.quick ? 1 : 3;
  const latencySeconds = ctx.tiny ? 1 : ctx.quick ? 2 : 5;
  const throughputSeconds = ctx.tiny ? 1 : ctx.quick ? 2 : 5;
  const connections = 64;

  // A model whose engine is a static nginx the activator starts; one per activator.
  const engineConfig = async (name: string) => {
    const port = await freePort();
    const dir = join(ctx.dir, `${name}-engine`);
    const command = nginxCommand(dir, nginxStaticConfig(dir, { port, body: chatAnswer }));
    const file = writeSnoozeYaml(
      ctx,
      name,
      `models:
  bench:
    sleep: false
    warmup: false
    sleepAfter: 1h
    port: ${port}
    command: ${yamlArgv(command)}
`,
    );
    return { port, file, command };
  };
  const engine = await engineConfig("warm-path");
  const enginePort = engine.port;
  const activator = await startActivator(engine.file, {
    cpuProfileDir: ctx.profileDir ? join(ctx.profileDir, "warm-path") : undefined,
  });
  const baselineDir = process.env.BENCH_BASELINE;
  const baseline = baselineDir
    ? await startActivator((await engineConfig("warm-path-baseline")).file, {
        script: join(baselineDir, "hack/bench/activator-process.ts"),
      })
    : undefined;
  const peer = llamaSwapPeer(ctx);
  const names: WarmPathTarget[] = [
    ...warmPathTargets,
    ...(baseline ? ["activator-baseline" as const] : []),
    ...(peer ? ["llama-swap" as const] : []),
  ];
  const proxies: { stop(): Promise<void> }[] = [];
  try {
    // llama-swap starts an engine of its own (the same static nginx) on its first request, below.
    const llamaSwap = peer
      ? await (async () => {
          const own = await engineConfig("warm-path-llama-swap");
          const running = await startLlamaSwap(ctx, peer, "warm-llama-swap", {
            bench: { cmd: own.command, proxy: `http://127.0.0.1:${own.port}` },
          });
          proxies.push(running);
          return running;
        })()
      : undefined;
    // The first request starts the engine (cold start); after it the model is ready.
    for (const a of [activator, ...(baseline ? [baseline] : [])]) {
      const first = await postJson(`${a.url}/v1/chat/completions`, chatRequest, 30_000);
      if (first.status !== 200) throw new Error(`warm-up request answered ${first.status}: ${first.text}`);
    }
    const upstream = `127.0.0.1:${enginePort}`;
    const ports = { nginx1: await freePort(), nginxAuto: await freePort() };
    const nginx1 = await startNginx(
      join(ctx.dir, "warm-nginx-1w"),
      nginxProxyConfig(join(ctx.dir, "warm-nginx-1w"), { workers: 1, port: ports.nginx1, upstream }),
      ports.nginx1,
    );
    proxies.push(nginx1);
    const nginxAuto = await startNginx(
      join(ctx.dir, "warm-nginx-auto"),
      nginxProxyConfig(join(ctx.dir, "warm-nginx-auto"), {
        workers: "auto",
        port: ports.nginxAuto,
        upstream,
      }),
      ports.nginxAuto,
    );
    proxies.push(nginxAuto);
    const minimal = await startNodeProxy("minimal-proxy", upstream);
    const minimal2 = await startNodeProxy("minimal-proxy", upstream, ["--workers", "2"]);
    const relay = await startNodeProxy("node-relay", upstream);
    const framed = await startNodeProxy("framed-proxy", upstream);
    proxies.push(minimal, minimal2, relay, framed);

    const targets: Partial<
      Record<
        WarmPathTarget,
        { url: string; pids: () => number[]; gcPauses?: () => Promise<GcPauses | undefined> }
      >
    > = {
      direct: { url: `http://${upstream}`, pids: () => [] },
      "nginx-1w": { url: `http://127.0.0.1:${ports.nginx1}`, pids: nginx1.pids },
      "nginx-auto": { url: `http://127.0.0.1:${ports.nginxAuto}`, pids: nginxAuto.pids },
      "node-relay": { url: relay.url, pids: () => [relay.pid] },
      "node-framed": { url: framed.url, pids: () => [framed.pid] },
      "node-minimal": { url: minimal.url, pids: () => [minimal.pid] },
      "node-minimal-2p": {
        url: minimal2.url,
        pids: () => [minimal2.pid, ...childrenOf(minimal2.pid)],
      },
      activator: { url: activator.url, pids: () => [activator.pid], gcPauses: activator.gcPauses },
      ...(baseline
        ? {
            "activator-baseline": {
              url: baseline.url,
              pids: () => [baseline.pid],
              gcPauses: baseline.gcPauses,
            },
          }
        : {}),
      // Its own process only: the engine it starts is its child, and is not the proxy's CPU.
      ...(llamaSwap ? { "llama-swap": { url: llamaSwap.url, pids: () => [llamaSwap.pid] } } : {}),
    };
    for (const [name, target] of Object.entries(targets)) {
      const check = await postJson(`${target.url}/v1/chat/completions`, chatRequest);
      if (check.status !== 200 || !check.text.includes("chat.completion"))
        throw new Error(
          `${name} did not answer the chat request: ${check.status} ${check.text.slice(0, 200)}`,
        );
    }

    const results: WarmPathRound[] = [];
    for (let round = 0; round < rounds; round++) {
      const latency = {} as WarmPathRound["latency"];
      const throughput = {} as WarmPathRound["throughput"];
      const measure = async (name: WarmPathTarget) => {
        const target = targets[name]!;
        const url = `${target.url}/v1/chat/completions`;
        latency[name] = await runWrk({
          url,
          body: chatRequest,
          connections: 1,
          durationSeconds: latencySeconds,
          dir: ctx.dir,
        });
        const meter = cpuMeter(target.pids());
        const gcBefore = await target.gcPauses?.();
        const loaded = await runWrk({
          url,
          body: chatRequest,
          connections,
          durationSeconds: throughputSeconds,
          dir: ctx.dir,
        });
        const cpuSeconds = meter.read();
        const gcAfter = await target.gcPauses?.();
        throughput[name] = {
          ...loaded,
          cpuSeconds,
          ...(gcBefore && gcAfter ? { gcMs: gcAfter.ms - gcBefore.ms } : {}),
        };
        ctx.log(
          `warm path round ${round + 1}/${rounds} ${name}: p50 ${latency[name].latency.p50} µs, ` +
            `${Math.round(loaded.requestsPerSecond)} req/s`,
        );
      };
      // --tiny checks the harness, not the numbers: every target at once.
      if (ctx.tiny) await Promise.all(names.map(measure));
      else for (const name of rotate(names, round)) await measure(name);
      results.push({ latency, throughput });
    }

    const summaries = names.map((target): WarmPathSummary => {
      const errors = results.reduce(
        (sum, r) => sum + r.latency[target].errors + r.throughput[target].errors,
        0,
      );
      return {
        target,
        p50Us: medianOf(results, (r) => r.latency[target].latency.p50),
        p99Us: medianOf(results, (r) => r.latency[target].latency.p99),
        addedP50Us: medianOf(results, (r) => r.latency[target].latency.p50 - r.latency.direct.latency.p50),
        addedP99Us: medianOf(results, (r) => r.latency[target].latency.p99 - r.latency.direct.latency.p99),
        requestsPerSecond: medianOf(results, (r) => r.throughput[target].requestsPerSecond),
        cpuUsPerRequest:
          target === "direct"
            ? Number.NaN
            : medianOf(
                results,
                (r) => (r.throughput[target].cpuSeconds / r.throughput[target].requests) * 1e6,
              ),
        ...(results.every((r) => r.throughput[target].gcMs !== undefined)
          ? {
              gcPauseUsPerRequest: medianOf(
                results,
                (r) => (r.throughput[target].gcMs! / r.throughput[target].requests) * 1e3,
              ),
            }
          : {}),
        errors,
      };
    });
    const ratioOf = (target: WarmPathTarget, other: WarmPathTarget) =>
      medianOf(
        results,
        (r) => r.throughput[target]!.requestsPerSecond / r.throughput[other]!.requestsPerSecond,
      );
    const ratio = (other: WarmPathTarget) => ratioOf("activator", other);
    const cpuPerRequest = (r: WarmPathRound, target: WarmPathTarget) =>
      r.throughput[target]!.cpuSeconds / r.throughput[target]!.requests;
    return {
      rounds,
      latencySeconds,
      throughputSeconds,
      throughputConnections: connections,
      summaries,
      throughputVsNginx1: ratio("nginx-1w"),
      throughputVsNginxAuto: ratio("nginx-auto"),
      throughputVsNodeMinimal: ratio("node-minimal"),
      nodeVsNginx1: {
        relay: ratioOf("node-relay", "nginx-1w"),
        framed: ratioOf("node-framed", "nginx-1w"),
        minimal: ratioOf("node-minimal", "nginx-1w"),
      },
      ...(peer ? { throughputVsLlamaSwap: ratio("llama-swap") } : {}),
      ...(baseline
        ? {
            vsBaseline: {
              requestsPerSecond: ratio("activator-baseline"),
              cpuPerRequest: medianOf(
                results,
                (r) => cpuPerRequest(r, "activator") / cpuPerRequest(r, "activator-baseline"),
              ),
              addedP50Us: medianOf(
                results,
                (r) => r.latency.activator.latency.p50 - r.latency["activator-baseline"]!.latency.p50,
              ),
            },
          }
        : {}),
    };
  } finally {
    for (const proxy of proxies) await proxy.stop();
    await activator.close();
    await baseline?.close();
  }
}
