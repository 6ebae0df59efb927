/**
 * Streaming: `streams` (250, then 1,000) SSE chat streams at once, through nginx (one
 * worker; a worker per core), through the minimal Node.js proxy (`minimal-proxy.ts`: what Node's
 * HTTP costs per chunk), through Node relaying bytes with no HTTP (`node-relay.ts`: the floor of
 * any Node proxy) and through the activator, with the engine itself as the reference. The engine
 * is `sse-upstream.ts`, which emits one
 * token event for every running stream per `itlMs` tick (a vLLM decode step
 * in miniature) and spends almost no CPU, so the proxies get the cores. The
 * client (its own process) counts events over a fixed window after every
 * stream has started; the proxy's CPU is read from /proc over that window.
 * A proxy that cannot keep up delivers fewer events (the engine skips a
 * stream whose socket is backed up, rather than buffer without bound).
 *
 * With BENCH_PIN_CPUS=1 (and two or more CPUs) the client and the engine run on the first ones
 * and the proxy under test alone on the last (`cpuSplit`), so each proxy gets one core whatever
 * its threads.
 *
 * BENCH_BASELINE=<dir> names another checkout: its activator streams beside this one's as the
 * target `activator-baseline` (on an engine of its own), so a change to the pump is measured A/B.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startActivator } from "./activator.ts";
import type { LoopDelay } from "./activator-protocol.ts";
import { forkClient } from "./child.ts";
import type { SseResult } from "./clients/sse.ts";
import { type BenchContext, postJson, rotate, until, writeSnoozeYaml, yamlArgv } from "./context.ts";
import { llamaSwapPeer, startLlamaSwap } from "./llama-swap.ts";
import { nginxProxyConfig, startNginx } from "./nginx.ts";
import { freePort } from "./ports.ts";
import { cpuMeter, cpuSplit, peakRssBytes, pinTo } from "./proc.ts";
import { startNodeProxy } from "./server-process.ts";
import { median, summarize } from "./stats.ts";

/** Asks the admin API and /healthz one after the other until `stop`, recording each answer's latency. */
async function probeAdmin(origin: string, stop: Promise<void>): Promise<number[]> {
  const latencies: number[] = [];
  let stopped = false;
  void stop.then(() => {
    stopped = true;
  });
  for (let i = 0; !stopped && i < 10_000; i++) {
    const started = performance.now();
    const path = i % 2 === 0 ? "/snooze/v1/models" : "/healthz";
    await fetch(`${origin}${path}`, { signal: AbortSignal.timeout(30_000) })
      .then((r) => r.arrayBuffer())
      .catch(() => {});
    latencies.push(performance.now() - started);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return latencies;
}

export const streamingTargets = [
  "direct",
  "nginx-1w",
  "nginx-auto",
  "node-relay",
  "node-minimal",
  "activator",
] as const;
export type StreamingTarget = (typeof streamingTargets)[number] | "llama-swap" | "activator-baseline";

export interface StreamingSummary {
  target: StreamingTarget;
  eventsPerSecond: number;
  cpuUsPerEvent: number;
  /** Proxy CPU over the window, in cores (1.0 = one core busy all the time). */
  cores: number;
  /** The proxy's peak resident set over the whole scenario (VmHWM; nginx: its processes summed), bytes. */
  peakRss: number;
  streamsLive: number;
  /** Seconds from sending until every stream had its first event (worst round); NaN if some never did. */
  allStartedSeconds: number;
  /** Each stream's wait from its request to its first event, ms: p99 and max, worst round. */
  firstEventMs: { p99: number; max: number };
  /**
   * The activator only: its admin API (`/snooze/v1/models`) and `/healthz`, asked in a loop during
   * the window, and its event loop's delay over the same window (the median round's).
   */
  admin?: { p50Ms: number; maxMs: number; probes: number; loopDelay: LoopDelay };
  errors: string[];
}

export interface StreamingResult {
  rounds: number;
  streams: number;
  itlMs: number;
  windowSeconds: number;
  /** The CPUs of the client and engine, and of the proxy under test; undefined when not pinned. */
  pinned?: { load: string; proxy: string };
  /** Events per second the engine offers: streams / ITL. */
  offeredPerSecond: number;
  summaries: StreamingSummary[];
  /** Activator events/s over nginx's, median of per-round ratios. */
  rateVsNginx1: number;
  rateVsNginxAuto: number;
  /** With BENCH_BASELINE: this activator over the baseline's, medians of the per-round ratios. */
  vsBaseline?: { rate: number; cpuPerChunk: number };
  /** With BENCH_LLAMA_SWAP: activator events/s over llama-swap's, median of per-round ratios. */
  rateVsLlamaSwap?: number;
}

const upstreamScript = fileURLToPath(new URL("./sse-upstream.ts", import.meta.url));

/** How many streams each run opens: BENCH_STREAMS=250,1000 (a list), else by the run's size. */
export function streamCounts(ctx: BenchContext): number[] {
  const fromEnv = (process.env.BENCH_STREAMS ?? "")
    .split(",")
    .map(Number)
    .filter((n) => Number.isInteger(n) && n > 0);
  return fromEnv.length ? fromEnv : ctx.tiny ? [20] : ctx.quick ? [200] : [250, 1_000];
}

export async function streaming(ctx: BenchContext, streams: number): Promise<StreamingResult> {
  const rounds = ctx.quick ? 1 : 2;
  const itlMs = Number(process.env.BENCH_ITL) || 10;
  const windowMs = ctx.tiny ? 300 : ctx.quick ? 2_000 : 5_000;
  const split = cpuSplit();
  const engineArgv = [process.execPath, upstreamScript, "--port", "${PORT}", "--itl", String(itlMs)];
  const config = writeSnoozeYaml(
    ctx,
    "streaming",
    `models:
  bench:
    sleep: false
    warmup: false
    sleepAfter: 1h
    command: ${yamlArgv(split ? ["taskset", "-c", split.load, ...engineArgv] : engineArgv)}
`,
  );
  const activator = await startActivator(config, {
    cpuProfileDir: ctx.profileDir ? join(ctx.profileDir, "streaming") : undefined,
  });
  const baselineDir = process.env.BENCH_BASELINE;
  const baseline = baselineDir
    ? await startActivator(config, { script: join(baselineDir, "hack/bench/activator-process.ts") })
    : undefined;
  const proxies: { stop(): Promise<void> }[] = [];
  const pin = (pids: readonly number[], cpus: "load" | "proxy") => {
    if (split) pinTo(pids, split[cpus]);
  };
  try {
    // Before the engine starts: the engine's own command moves it to the load's CPUs.
    pin([activator.pid], "proxy");
    const first = await postJson(`${activator.url}/v1/chat/completions`, { model: "bench", max_tokens: 1 });
    if (first.status !== 200) throw new Error(`first request answered ${first.status}: ${first.text}`);
    const upstream = (await activator.route("bench")).address;
    if (!upstream) throw new Error("the engine has no address");
    // The baseline's own engine, started by its first request like this one's.
    const baselineUpstream = baseline
      ? await (async () => {
          pin([baseline.pid], "proxy");
          const answer = await postJson(`${baseline.url}/v1/chat/completions`, {
            model: "bench",
            max_tokens: 1,
          });
          if (answer.status !== 200)
            throw new Error(`the baseline answered ${answer.status}: ${answer.text}`);
          return (await baseline.route("bench")).address!;
        })()
      : undefined;
    const ports = { nginx1: await freePort(), nginxAuto: await freePort() };
    const start = async (name: string, workers: number | "auto", port: number) => {
      const dir = join(ctx.dir, `stream-${name}`);
      const nginx = await startNginx(dir, nginxProxyConfig(dir, { workers, port, upstream }), port);
      proxies.push(nginx);
      pin(nginx.pids(), "proxy");
      return nginx;
    };
    const nginx1 = await start("nginx-1w", 1, ports.nginx1);
    const nginxAuto = await start("nginx-auto", "auto", ports.nginxAuto);
    const minimal = await startNodeProxy("minimal-proxy", upstream);
    const relay = await startNodeProxy("node-relay", upstream);
    proxies.push(minimal, relay);
    pin([minimal.pid, relay.pid], "proxy");
    // llama-swap must start an engine itself; it starts a placeholder process and proxies to the
    // engine every other target streams from, so all of them relay the same streams.
    const peer = llamaSwapPeer(ctx);
    const llamaSwap = peer
      ? await startLlamaSwap(ctx, peer, "stream-llama-swap", {
          bench: { cmd: ["sleep", "86400"], proxy: `http://${upstream}` },
        })
      : undefined;
    if (llamaSwap) {
      proxies.push(llamaSwap);
      pin([llamaSwap.pid], "proxy");
    }
    const names: StreamingTarget[] = [
      ...streamingTargets,
      ...(llamaSwap ? ["llama-swap" as const] : []),
      ...(baseline ? ["activator-baseline" as const] : []),
    ];
    const targets: Partial<Record<StreamingTarget, { origin: string; pids: () => number[] }>> = {
      direct: { origin: `http://${upstream}`, pids: () => [] },
      "nginx-1w": { origin: `http://127.0.0.1:${ports.nginx1}`, pids: nginx1.pids },
      "nginx-auto": { origin: `http://127.0.0.1:${ports.nginxAuto}`, pids: nginxAuto.pids },
      "node-relay": { origin: relay.url, pids: () => [relay.pid] },
      "node-minimal": { origin: minimal.url, pids: () => [minimal.pid] },
      activator: { origin: activator.url, pids: () => [activator.pid] },
      ...(llamaSwap ? { "llama-swap": { origin: llamaSwap.url, pids: () => [llamaSwap.pid] } } : {}),
      ...(baseline ? { "activator-baseline": { origin: baseline.url, pids: () => [baseline.pid] } } : {}),
    };
    if (llamaSwap) {
      const check = await postJson(`${llamaSwap.url}/v1/chat/completions`, { model: "bench", max_tokens: 1 });
      if (check.status !== 200)
        throw new Error(`llama-swap answered ${check.status}: ${check.text.slice(0, 200)}`);
    }
    // Long enough to outlast the window; the client ends every stream after it.
    const body = JSON.stringify({
      model: "bench",
      messages: [{ role: "user", content: "Tell me a long story." }],
      max_tokens: 1_000_000,
      stream: true,
    });

    type RoundResult = {
      rate: number;
      cpu: number;
      live: number;
      allStarted: number;
      firstEventMs: { p99: number; max: number };
      admin: number[];
      loopDelay?: LoopDelay;
      errors: string[];
    };
    const perRound: Partial<Record<StreamingTarget, RoundResult>>[] = [];
    for (let round = 0; round < rounds; round++) {
      const results = {} as (typeof perRound)[number];
      for (const name of rotate(names, round)) {
        const target = targets[name]!;
        const client = await forkClient<{ cmd: "run" }>("./clients/sse.ts", {
          origin: target.origin,
          path: "/v1/chat/completions",
          body,
          streams,
          warmupMs: ctx.tiny ? 200 : 1_000,
          startTimeoutMs: 15_000,
          windowMs,
        });
        pin([client.pid], "load");
        let meter: { read(): number } | undefined;
        let cpu = 0;
        const windowEnd = Promise.withResolvers<void>();
        let admin: Promise<number[]> = Promise.resolve([]);
        let loopDelay: Promise<LoopDelay | undefined> = Promise.resolve(undefined);
        client.onEvent((event) => {
          if (event.window === "start") {
            meter = cpuMeter(target.pids());
            if (name === "activator") {
              admin = probeAdmin(activator.url, windowEnd.promise);
              loopDelay = activator.loopDelay().then(async (stop) => {
                await windowEnd.promise;
                return stop();
              });
            }
          }
          if (event.window === "end") {
            cpu = meter?.read() ?? 0;
            windowEnd.resolve();
          }
        });
        const result = await client.ask<SseResult>({ cmd: "run" }, 120_000);
        windowEnd.resolve();
        await client.close();
        const rate = result.events / (result.windowMs / 1000);
        const adminMs = await admin;
        const delay = await loopDelay;
        results[name] = {
          rate,
          cpu,
          live: result.streamsLive,
          allStarted: result.allStartedSeconds,
          firstEventMs: result.firstEventMs,
          admin: adminMs,
          loopDelay: delay,
          errors: result.errors,
        };
        ctx.log(
          `streaming round ${round + 1}/${rounds} ${name}: ${Math.round(rate)} events/s, ` +
            `${result.streamsLive}/${streams} streams live, all started in ${result.allStartedSeconds.toFixed(2)} s, ` +
            `proxy CPU ${(cpu / (result.windowMs / 1000)).toFixed(2)} cores` +
            (adminMs.length
              ? `, admin max ${Math.max(...adminMs).toFixed(0)} ms (${adminMs.length} probes)`
              : "") +
            (delay
              ? `, event-loop delay p50 ${delay.p50Ms.toFixed(0)} ms, max ${delay.maxMs.toFixed(0)} ms, ` +
                `GC pauses ${delay.gcMs.toFixed(0)} ms (longest ${delay.gcMaxMs.toFixed(1)} ms)`
              : ""),
        );
        const through =
          name === "activator-baseline" ? baseline : name === "activator" ? activator : undefined;
        if (through)
          await until(async () => (await through.route("bench")).inFlight === 0, 30_000, "streams to end");
        const engine = name === "activator-baseline" ? baselineUpstream : upstream;
        await until(
          async () => (await (await fetch(`http://${engine}/running`)).text()) === "0",
          30_000,
          `the engine's streams through ${name} to end`,
        );
      }
      perRound.push(results);
    }
    const windowSeconds = windowMs / 1000;
    const of = (r: (typeof perRound)[number], target: StreamingTarget) => r[target]!;
    /** This activator's chunk rate over `other`'s, median of the per-round ratios. */
    const rateOver = (other: StreamingTarget) =>
      median(perRound.map((r) => of(r, "activator").rate / of(r, other).rate));
    const cpuPerChunk = (r: (typeof perRound)[number], target: StreamingTarget) =>
      of(r, target).cpu / of(r, target).rate;
    const peaks = Object.fromEntries(
      names.map((name) => [name, targets[name]!.pids().reduce((sum, pid) => sum + peakRssBytes(pid), 0)]),
    );
    const summaries = names.map(
      (target): StreamingSummary => ({
        target,
        eventsPerSecond: median(perRound.map((r) => of(r, target).rate)),
        cpuUsPerEvent:
          target === "direct"
            ? Number.NaN
            : median(perRound.map((r) => (of(r, target).cpu / (of(r, target).rate * windowSeconds)) * 1e6)),
        cores:
          target === "direct" ? Number.NaN : median(perRound.map((r) => of(r, target).cpu / windowSeconds)),
        peakRss: target === "direct" ? Number.NaN : peaks[target]!,
        streamsLive: Math.min(...perRound.map((r) => of(r, target).live)),
        allStartedSeconds: Math.max(...perRound.map((r) => of(r, target).allStarted)),
        firstEventMs: {
          p99: Math.max(...perRound.map((r) => of(r, target).firstEventMs.p99)),
          max: Math.max(...perRound.map((r) => of(r, target).firstEventMs.max)),
        },
        admin:
          target === "activator"
            ? (() => {
                const all = perRound.flatMap((r) => of(r, target).admin);
                const delays = perRound.map((r) => of(r, target).loopDelay!);
                const medianRound = delays.toSorted((a, b) => a.p50Ms - b.p50Ms)[(delays.length - 1) >> 1]!;
                return {
                  p50Ms: all.length ? summarize(all).p50 : Number.NaN,
                  maxMs: Math.max(...all),
                  probes: all.length,
                  loopDelay: medianRound,
                };
              })()
            : undefined,
        errors: perRound.flatMap((r) => of(r, target).errors),
      }),
    );
    return {
      rounds,
      streams,
      itlMs,
      ...(split ? { pinned: split } : {}),
      windowSeconds,
      offeredPerSecond: (streams * 1000) / itlMs,
      summaries,
      rateVsNginx1: rateOver("nginx-1w"),
      rateVsNginxAuto: rateOver("nginx-auto"),
      ...(baseline
        ? {
            vsBaseline: {
              rate: rateOver("activator-baseline"),
              cpuPerChunk: median(
                perRound.map((r) => cpuPerChunk(r, "activator") / cpuPerChunk(r, "activator-baseline")),
              ),
            },
          }
        : {}),
      ...(llamaSwap ? { rateVsLlamaSwap: rateOver("llama-swap") } : {}),
    };
  } finally {
    for (const proxy of proxies) await proxy.stop();
    await activator.close();
    await baseline?.close();
  }
}
