/**
 * Activation overhead: what a request to a sleeping model waits beyond the
 * engine's own wake. The model is put to sleep (level 1) through the admin
 * API; `count` requests (1,000) are sent at once on connections opened
 * beforehand; the first one makes the activator ask for the model, the
 * autoscaler wakes the engine (POST /wake_up, then /is_sleeping), runs the
 * 1-token warm-up, marks it ready, and the activator releases every held
 * request to it.
 *
 * For request i, overhead = TTFB_i − E_i, where TTFB_i is from sending it to
 * its response headers (non-streaming, max_tokens 1) and E_i is the part of
 * that wait during which the engine itself was busy waking up and warming up:
 * the overlap of [sent_i, headers_i] with [wake call started, tier ready], as
 * recorded by the autoscaler around the platform's wake call and at the ready
 * event. What stays is Snooze's: noticing the demand, deciding, the HTTP round
 * trips to the engine, releasing the held requests, proxying them, and the
 * engine answering 1,000 requests at once.
 *
 * The direct baseline, in the same round: the same requests parked in the
 * sleeping engine itself, then POST /wake_up; overhead_i = headers_i − end of
 * the wake call: the engine's own cost of answering that many requests at once.
 *
 * With BENCH_LLAMA_SWAP, the peer gets the same burst at the same engine, stopped: it has no
 * sleep, so a cold start is its only activation. Its engine's start is timed from outside, by a
 * prober asking the engine's /health every millisecond, and compared with Snooze's cold start.
 */
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startActivator } from "./activator.ts";
import type { Timeline } from "./activator-protocol.ts";
import { forkClient } from "./child.ts";
import type { BurstCommand, BurstResult } from "./clients/burst.ts";
import { type BenchContext, postJson, rotate, until, writeSnoozeYaml, yamlArgv } from "./context.ts";
import { llamaSwapPeer, type RunningLlamaSwap, simModel, startLlamaSwap } from "./llama-swap.ts";
import { freePort } from "./ports.ts";
import { listenOverflows, peakRssBytes } from "./proc.ts";
import { startServerProcess } from "./server-process.ts";
import { median, summarize } from "./stats.ts";

/** The sim's settings: no token time, so the engine's part is its wake (and HTTP work). */
export const wakeTimeMs = 1_000;
const simFlags = [
  "--enable-sleep-mode",
  "--ttft",
  "0ms",
  "--itl",
  "0ms",
  "--max-num-seqs",
  "4096",
  "--load-time",
  "100ms",
  "--sleep-time-l1",
  "50ms",
  "--wake-time-l1",
  `${wakeTimeMs}ms`,
];
const request = JSON.stringify({
  model: "bench",
  messages: [{ role: "user", content: "Are you awake?" }],
  max_tokens: 1,
});
const snoozeBin = fileURLToPath(new URL("../../bin/snooze.js", import.meta.url));

/** Quantiles of one activation as seen by each side, ms. */
export interface Spread {
  p50: number;
  p99: number;
}

export interface ActivatorRound {
  overheadsMs: number[];
  ttfbMs: number[];
  /** The wake call (POST /wake_up … /is_sleeping false) and the warm-up, as timed around them. */
  wakeMs: number;
  warmupMs: number;
  /** From the first request sent until the wake call started. */
  decisionMs: number;
  held: number;
  failures: number;
  /** After the ready event: when each request went to the engine's pool, its headers came back, the client had them. */
  dispatchedMs: number[];
  upstreamHeadersMs: number[];
  clientHeadersMs: number[];
  connects: number;
  /** Connection attempts dropped on full accept queues during the round (machine-wide). */
  listenOverflows: number;
  /**
   * The first held request's first byte at the client − the engine being ready (/is_sleeping
   * false, the end of the wake call), less the warm-up (counted apart).
   */
  firstByteMs: number;
  /**
   * Snooze's own part of that first byte: from ready until the first released request left for the
   * engine, plus from the engine's first answer headers until the client had its first byte. The
   * rest is the engine answering the burst (compare `engineBurst.firstMs`).
   */
  ownFirstByteMs: number;
  /** The last held request's first byte at the client − ready: when the whole burst had its answers. */
  lastByteMs: number;
}

/** One cold start with `count` requests held: what Snooze adds once the engine listens. */
export interface ColdRound {
  /** The first held request's first byte − the engine's first /health answer (1 ms prober), less the warm-up. */
  firstByteMs: number;
  /** From the engine's first /health answer to the warm-up call: how late Snooze learned it was up. */
  detectMs: number;
  /**
   * Snooze's own part of `firstByteMs`: learning the engine is up, from the warm-up's end until the
   * first released request left for the engine, and from the engine's first answer headers until the
   * client had them. The rest is the just-started engine answering the burst.
   */
  ownFirstByteMs: number;
  warmupMs: number;
  /** From the activation (tier starting) to the engine listening: the engine's own start. */
  startMs: number;
  /** Every request: TTFB after the engine listened, less the warm-up, p50/p99. */
  overheadsMs: number[];
  /** The last held request's first byte − the engine listening (the warm-up included). */
  lastByteMs: number;
  /** From the first request sent to the last one's first byte: the whole cold start as a client sees it. */
  allMs: number;
  /** From the first request sent to the engine listening: deciding, spawning, the engine's start. */
  sentToListeningMs: number;
  failures: number;
}

/** llama-swap's cold start with the same burst, timed from outside. */
export interface PeerColdRound {
  /** The first request's first byte − the engine's first /health answer. */
  firstByteMs: number;
  /** The last request's first byte − the engine's first /health answer. */
  lastByteMs: number;
  /** From the first request sent to the last one's first byte. */
  allMs: number;
  /** From the first request sent to the engine's first /health answer. */
  sentToListeningMs: number;
  failures: number;
}

export interface ActivationResult {
  rounds: number;
  count: number;
  idleBeforeMs: number;
  activator: {
    overhead: Spread;
    ttfb: Spread;
    wakeMs: number;
    warmupMs: number;
    decisionMs: number;
    held: number;
    failures: number;
    dispatched: Spread;
    upstreamHeaders: Spread;
    clientHeaders: Spread;
    connects: number;
    listenOverflows: number;
    firstByteMs: number;
    ownFirstByteMs: number;
    lastByteMs: number;
  };
  /** Cold starts with the same requests held (medians over rounds). */
  cold?: {
    firstByteMs: number;
    ownFirstByteMs: number;
    detectMs: number;
    warmupMs: number;
    startMs: number;
    overhead: Spread;
    lastByteMs: number;
    allMs: number;
    sentToListeningMs: number;
    failures: number;
  };
  /** Peak resident sets over the scenario (VmHWM), bytes: the activator process, and llama-swap's. */
  peakRss: { activator: number; llamaSwap?: number };
  /** With BENCH_LLAMA_SWAP: the peer's cold start with the same burst (medians over rounds). */
  llamaSwapCold?: PeerColdRound;
  /** The same requests sent at once straight to the awake engine, on new connections: the engine's own cost. */
  engineBurst: Spread & {
    /** The first answer of that burst: the engine's own first byte for it, the floor of `ownFirstByteMs`'s remainder. */
    firstMs: number;
    /** The last answer of that burst: the floor of `lastByteMs`. */
    lastMs: number;
    failures: number;
  };
  /** The same requests parked in the sleeping engine itself, then POST /wake_up: first byte − end of the wake. */
  engineParked: Spread & { failures: number };
}

const overlap = (a0: number, a1: number, b0: number, b1: number) =>
  Math.max(0, Math.min(a1, b1) - Math.max(a0, b0));
const spread = (values: number[]): Spread => {
  const s = summarize(values);
  return { p50: s.p50, p99: s.p99 };
};
const medianSpread = (spreads: Spread[]): Spread => ({
  p50: median(spreads.map((s) => s.p50)),
  p99: median(spreads.map((s) => s.p99)),
});

async function burst(origin: string, healthPath: string, count: number, preconnect: boolean) {
  const client = await forkClient<BurstCommand>("./clients/burst.ts", {
    origin,
    path: "/v1/chat/completions",
    healthPath,
    body: request,
    count,
    timeoutMs: 120_000,
  });
  if (preconnect) {
    const { connected } = await client.ask<{ connected: number }>({ cmd: "connect" });
    if (connected < count) throw new Error(`only ${connected} of ${count} connections opened`);
  }
  return client;
}

async function activatorRound(
  url: string,
  timeline: () => Promise<Timeline>,
  count: number,
  idleBeforeMs: number,
): Promise<ActivatorRound> {
  const slept = await postJson(`${url}/snooze/v1/models/bench/sleep`, {});
  if (slept.status !== 200 || !slept.text.includes("asleep")) throw new Error(`sleep failed: ${slept.text}`);
  // A model wakes after being idle a while: by then the activator's idle connections to the
  // engine have timed out (the engine's keep-alive is 5 s), as they would in real use.
  await new Promise((resolve) => setTimeout(resolve, idleBeforeMs));
  await timeline(); // forget what the sleep and earlier rounds recorded
  const client = await burst(url, "/healthz", count, true);
  try {
    const overflowsBefore = listenOverflows();
    await client.ask({ cmd: "fire" });
    const { results } = await client.ask<{ results: BurstResult[] }>({ cmd: "results" });
    const overflows = listenOverflows() - overflowsBefore;
    const t = await timeline();
    if (!t.wakeStart || !t.wakeEnd || !t.ready) throw new Error(`no wake recorded: ${JSON.stringify(t)}`);
    const ready = t.ready;
    const ok = results.filter((r) => r.status === 200);
    const firstSent = Math.min(...results.map((r) => r.sentAt));
    const warmup = t.warmupStart && t.warmupEnd ? t.warmupEnd - t.warmupStart : ready - t.wakeEnd;
    return {
      firstByteMs: Math.min(...ok.map((r) => r.headersAt)) - t.wakeEnd - warmup,
      ownFirstByteMs:
        Math.min(...(t.dispatched ?? [])) -
        ready +
        (Math.min(...ok.map((r) => r.headersAt)) - Math.min(...(t.upstreamHeaders ?? []))),
      lastByteMs: Math.max(...ok.map((r) => r.headersAt)) - ready,
      ttfbMs: ok.map((r) => r.headersAt - r.sentAt),
      overheadsMs: ok.map(
        (r) => r.headersAt - r.sentAt - overlap(r.sentAt, r.headersAt, t.wakeStart!, ready),
      ),
      wakeMs: t.wakeEnd - t.wakeStart,
      warmupMs: ready - t.wakeEnd,
      decisionMs: t.wakeStart - firstSent,
      held: t.heldAtWakeEnd ?? 0,
      failures: results.length - ok.length,
      dispatchedMs: (t.dispatched ?? []).map((at) => at - ready),
      upstreamHeadersMs: (t.upstreamHeaders ?? []).map((at) => at - ready),
      clientHeadersMs: ok.map((r) => r.headersAt - ready),
      connects: t.connects ?? 0,
      listenOverflows: overflows,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
  }
}

async function coldRound(
  url: string,
  route: () => Promise<{ tier: string }>,
  timeline: () => Promise<Timeline>,
  count: number,
): Promise<ColdRound> {
  const stopped = await postJson(`${url}/snooze/v1/models/bench/stop`, {});
  if (stopped.status !== 200) throw new Error(`stop failed: ${stopped.status} ${stopped.text}`);
  await until(async () => (await route()).tier === "cold", 30_000, "the model to stop");
  await timeline(); // forget what the stop recorded
  const client = await burst(url, "/healthz", count, true);
  try {
    await client.ask({ cmd: "fire" });
    const { results } = await client.ask<{ results: BurstResult[] }>({ cmd: "results" });
    const t = await timeline();
    if (!t.listening || !t.warmupStart || !t.warmupEnd || !t.activationStart || !t.ready)
      throw new Error(
        `no cold start recorded: ${JSON.stringify({ ...t, dispatched: undefined, upstreamHeaders: undefined })}`,
      );
    const warmupMs = t.warmupEnd - t.warmupStart;
    const listening = t.listening;
    const ok = results.filter((r) => r.status === 200);
    const firstSent = Math.min(...results.map((r) => r.sentAt));
    const lastHeaders = Math.max(...ok.map((r) => r.headersAt));
    const firstHeaders = Math.min(...ok.map((r) => r.headersAt));
    // Snooze's own check may hear the engine before the prober does (both ask a just-listening
    // engine, which answers in turn): learning it then cost nothing.
    const detectMs = Math.max(0, t.warmupStart - t.listening);
    return {
      firstByteMs: firstHeaders - t.listening - warmupMs,
      ownFirstByteMs:
        detectMs +
        (Math.min(...(t.dispatched ?? [])) - t.warmupEnd) +
        (firstHeaders - Math.min(...(t.upstreamHeaders ?? []))),
      detectMs,
      warmupMs,
      startMs: t.listening - t.activationStart,
      overheadsMs: ok.map((r) => r.headersAt - Math.max(r.sentAt, listening) - warmupMs),
      lastByteMs: lastHeaders - listening,
      allMs: lastHeaders - firstSent,
      sentToListeningMs: listening - firstSent,
      failures: results.length - ok.length,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
  }
}

/** Resolves with the wall-clock ms of the first 200 from `url`, asking every millisecond. */
async function firstHealthy(url: string, timeoutMs: number): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const ok = await fetch(url, { signal: AbortSignal.timeout(1_000) })
      .then(async (r) => {
        await r.arrayBuffer();
        return r.status === 200;
      })
      .catch(() => false);
    if (ok) return performance.timeOrigin + performance.now();
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
  throw new Error(`${url} did not answer within ${timeoutMs}ms`);
}

async function llamaSwapColdRound(
  peer: RunningLlamaSwap,
  engine: string,
  count: number,
): Promise<PeerColdRound> {
  const unloaded = await fetch(`${peer.url}/api/models/unload/bench`, { method: "POST" });
  if (unloaded.status !== 200) throw new Error(`llama-swap unload answered ${unloaded.status}`);
  await until(
    () =>
      fetch(`${engine}/health`).then(
        () => false,
        () => true,
      ),
    30_000,
    "llama-swap's engine to stop",
  );
  const client = await burst(peer.url, "/health", count, true);
  try {
    const listening = firstHealthy(`${engine}/health`, 60_000);
    await client.ask({ cmd: "fire" });
    const { results } = await client.ask<{ results: BurstResult[] }>({ cmd: "results" });
    const ready = await listening;
    const ok = results.filter((r) => r.status === 200);
    const headers = ok.map((r) => r.headersAt);
    const firstSent = Math.min(...results.map((r) => r.sentAt));
    return {
      firstByteMs: Math.min(...headers) - ready,
      lastByteMs: Math.max(...headers) - ready,
      allMs: Math.max(...headers) - firstSent,
      sentToListeningMs: ready - firstSent,
      failures: results.length - ok.length,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
  }
}

async function parkedInEngine(origin: string): Promise<number> {
  const text = await (await fetch(`${origin}/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith("vllm:num_requests_waiting"));
  return line ? Number(line.slice(line.lastIndexOf(" ") + 1)) : 0;
}

async function engineBurstRound(origin: string, count: number) {
  const client = await burst(origin, "/health", count, false);
  try {
    await client.ask({ cmd: "fire" });
    const { results } = await client.ask<{ results: BurstResult[] }>({ cmd: "results" });
    const ok = results.filter((r) => r.status === 200);
    const ttfbs = ok.map((r) => r.headersAt - r.sentAt);
    return {
      ...spread(ttfbs),
      firstMs: Math.min(...ttfbs),
      lastMs: Math.max(...ttfbs),
      failures: results.length - ok.length,
    };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
  }
}

async function engineParkedRound(origin: string, count: number) {
  const slept = await fetch(`${origin}/sleep?level=1&mode=wait`, { method: "POST" });
  if (slept.status !== 200) throw new Error(`direct sleep answered ${slept.status}`);
  const client = await burst(origin, "/health", count, true);
  try {
    await client.ask({ cmd: "fire" });
    await until(async () => (await parkedInEngine(origin)) >= count, 30_000, `${count} parked requests`);
    const woke = await fetch(`${origin}/wake_up`, { method: "POST" });
    const wakeEnd = performance.timeOrigin + performance.now();
    if (woke.status !== 200) throw new Error(`direct wake answered ${woke.status}`);
    const { results } = await client.ask<{ results: BurstResult[] }>({ cmd: "results" });
    const ok = results.filter((r) => r.status === 200);
    return { ...spread(ok.map((r) => r.headersAt - wakeEnd)), failures: results.length - ok.length };
  } finally {
    await client.ask({ cmd: "abort" }).catch(() => {});
    await client.close();
  }
}

async function startDirectSim(): Promise<{ origin: string; stop(): Promise<void> }> {
  const port = await freePort();
  const sim = await startServerProcess(
    [process.execPath, snoozeBin, "sim", "--served-model-name", "bench", "--port", String(port), ...simFlags],
    port,
    { VLLM_SERVER_DEV_MODE: "1", SNOOZE_LOG_LEVEL: "error" },
  );
  return { origin: `http://127.0.0.1:${port}`, stop: () => sim.stop() };
}

export async function activation(ctx: BenchContext): Promise<ActivationResult> {
  const rounds = ctx.quick ? 1 : 3;
  // BENCH_HELD sets how many requests are held (e.g. the full run's 1,000 in a --quick run).
  const count = Number(process.env.BENCH_HELD) || (ctx.tiny ? 20 : ctx.quick ? 200 : 1_000);
  const idleBeforeMs = ctx.tiny ? 100 : 5_500;
  // BENCH_CONCURRENCY sets the model's concurrency (default 0: unlimited, every held request released at once).
  const concurrency = Number(process.env.BENCH_CONCURRENCY) || 0;
  const config = writeSnoozeYaml(
    ctx,
    "activation",
    `models:
  bench:
    sleepAfter: 1h
    holdBudget: 2m
    queueDepth: 20000
    concurrency: ${concurrency}
    # The engine prints its start-up as vLLM does (the benchmark's own processes are quiet).
    env: { SNOOZE_LOG_LEVEL: info }
    command: ${yamlArgv(["${SNOOZE}", "sim", "--served-model-name", "${MODEL}", "--port", "${PORT}", ...simFlags])}
`,
  );
  const activator = await startActivator(config, {
    cpuProfileDir: ctx.profileDir ? join(ctx.profileDir, "activation") : undefined,
  });
  const direct = await startDirectSim();
  // The peer starts the same sim, with the same flags, on a port of its own.
  const peer = llamaSwapPeer(ctx);
  const peerEnginePort = peer ? await freePort() : 0;
  const llamaSwap = peer
    ? await startLlamaSwap(ctx, peer, "activation-llama-swap", {
        bench: simModel("bench", peerEnginePort, simFlags),
      })
    : undefined;
  try {
    const first = await postJson(`${activator.url}/v1/chat/completions`, request, 30_000);
    if (first.status !== 200) throw new Error(`first request answered ${first.status}: ${first.text}`);
    const mine: ActivatorRound[] = [];
    const bursts: (Spread & { firstMs: number; lastMs: number; failures: number })[] = [];
    const parked: (Spread & { failures: number })[] = [];
    const colds: ColdRound[] = [];
    const peerColds: PeerColdRound[] = [];
    const sides = ["activator", "engine", ...(llamaSwap ? ["llama-swap" as const] : [])] as const;
    for (let round = 0; round < rounds; round++) {
      const label = `activation round ${round + 1}/${rounds}`;
      for (const target of rotate(sides, round)) {
        if (target === "llama-swap") {
          const c = await llamaSwapColdRound(llamaSwap!, `http://127.0.0.1:${peerEnginePort}`, count);
          ctx.log(
            `${label} llama-swap, cold start: first byte ${c.firstByteMs.toFixed(1)} ms, last ${c.lastByteMs.toFixed(1)} ms ` +
              `after the engine listened; all answered ${c.allMs.toFixed(0)} ms after the first was sent; failed ${c.failures}`,
          );
          peerColds.push(c);
        } else if (target === "activator") {
          const r = await activatorRound(
            activator.url,
            () => activator.timeline("bench"),
            count,
            idleBeforeMs,
          );
          const o = summarize(r.overheadsMs);
          ctx.log(
            `${label} activator: overhead p50 ${o.p50.toFixed(1)} ms p99 ${o.p99.toFixed(1)} ms; ` +
              `wake ${r.wakeMs.toFixed(0)} ms, warm-up ${r.warmupMs.toFixed(1)} ms, held ${r.held}, failed ${r.failures}, ` +
              `${r.connects} connections opened, ${r.listenOverflows} dropped on full accept queues`,
          );
          mine.push(r);
          const c = await coldRound(
            activator.url,
            () => activator.route("bench"),
            () => activator.timeline("bench"),
            count,
          );
          ctx.log(
            `${label} activator, cold start: first byte ${c.firstByteMs.toFixed(1)} ms after the engine listened ` +
              `(learned ${c.detectMs.toFixed(1)} ms after it, warm-up ${c.warmupMs.toFixed(1)} ms apart; Snooze's own ${c.ownFirstByteMs.toFixed(1)} ms), ` +
              `wake first byte ${r.firstByteMs.toFixed(1)} ms after /is_sleeping false ` +
              `(Snooze's own ${r.ownFirstByteMs.toFixed(1)} ms), last answer ${r.lastByteMs.toFixed(1)} ms after ready; ` +
              `cold: all answered ${c.allMs.toFixed(0)} ms after the first was sent, failed ${c.failures}`,
          );
          colds.push(c);
        } else {
          const b = await engineBurstRound(direct.origin, count);
          const p = await engineParkedRound(direct.origin, count);
          ctx.log(
            `${label} engine alone: burst first ${b.firstMs.toFixed(1)} ms last ${b.lastMs.toFixed(1)} ms p50 ${b.p50.toFixed(1)} ms p99 ${b.p99.toFixed(1)} ms; ` +
              `parked p50 ${p.p50.toFixed(1)} ms p99 ${p.p99.toFixed(1)} ms`,
          );
          bursts.push(b);
          parked.push(p);
        }
      }
    }
    return {
      rounds,
      count,
      idleBeforeMs,
      peakRss: {
        activator: peakRssBytes(activator.pid),
        ...(llamaSwap ? { llamaSwap: peakRssBytes(llamaSwap.pid) } : {}),
      },
      activator: {
        overhead: medianSpread(mine.map((r) => spread(r.overheadsMs))),
        ttfb: medianSpread(mine.map((r) => spread(r.ttfbMs))),
        wakeMs: median(mine.map((r) => r.wakeMs)),
        warmupMs: median(mine.map((r) => r.warmupMs)),
        decisionMs: median(mine.map((r) => r.decisionMs)),
        held: Math.min(...mine.map((r) => r.held)),
        failures: mine.reduce((sum, r) => sum + r.failures, 0),
        dispatched: medianSpread(mine.map((r) => spread(r.dispatchedMs))),
        upstreamHeaders: medianSpread(mine.map((r) => spread(r.upstreamHeadersMs))),
        clientHeaders: medianSpread(mine.map((r) => spread(r.clientHeadersMs))),
        connects: median(mine.map((r) => r.connects)),
        listenOverflows: mine.reduce((sum, r) => sum + r.listenOverflows, 0),
        firstByteMs: median(mine.map((r) => r.firstByteMs)),
        ownFirstByteMs: median(mine.map((r) => r.ownFirstByteMs)),
        lastByteMs: median(mine.map((r) => r.lastByteMs)),
      },
      cold: {
        firstByteMs: median(colds.map((c) => c.firstByteMs)),
        ownFirstByteMs: median(colds.map((c) => c.ownFirstByteMs)),
        detectMs: median(colds.map((c) => c.detectMs)),
        warmupMs: median(colds.map((c) => c.warmupMs)),
        startMs: median(colds.map((c) => c.startMs)),
        overhead: medianSpread(colds.map((c) => spread(c.overheadsMs))),
        lastByteMs: median(colds.map((c) => c.lastByteMs)),
        allMs: median(colds.map((c) => c.allMs)),
        sentToListeningMs: median(colds.map((c) => c.sentToListeningMs)),
        failures: colds.reduce((sum, c) => sum + c.failures, 0),
      },
      ...(llamaSwap
        ? {
            llamaSwapCold: {
              firstByteMs: median(peerColds.map((c) => c.firstByteMs)),
              lastByteMs: median(peerColds.map((c) => c.lastByteMs)),
              allMs: median(peerColds.map((c) => c.allMs)),
              sentToListeningMs: median(peerColds.map((c) => c.sentToListeningMs)),
              failures: peerColds.reduce((sum, c) => sum + c.failures, 0),
            },
          }
        : {}),
      engineBurst: {
        ...medianSpread(bursts),
        firstMs: median(bursts.map((b) => b.firstMs)),
        lastMs: median(bursts.map((b) => b.lastMs)),
        failures: bursts.reduce((sum, b) => sum + b.failures, 0),
      },
      engineParked: { ...medianSpread(parked), failures: parked.reduce((sum, p) => sum + p.failures, 0) },
    };
  } finally {
    await llamaSwap?.stop();
    await direct.stop();
    await activator.close();
  }
}
