/**
 * The activator under test, in a process of its own (as `snooze serve` runs it:
 * activator and autoscaler together, engines as child processes), so its CPU
 * and memory are measured apart from the load generator. Started by
 * `activator.ts` with an IPC channel; it answers a few questions a benchmark
 * needs that no HTTP API gives: memory after a forced GC, the hold queue, and
 * when an activation's engine calls began and ended.
 *
 *   node --expose-gc hack/bench/activator-process.ts <snooze.yaml>
 */
import diagnostics from "node:diagnostics_channel";
import { readFileSync } from "node:fs";
import { type ELDHistogram, monitorEventLoopDelay, PerformanceObserver } from "node:perf_hooks";
import { LocalPlatform } from "../../autoscaler/local/platform.ts";
import type { Platform, Replica } from "../../autoscaler/platform.ts";
import { startLocalSnooze } from "../../cli/local-snooze.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import type { ActivatorReply, ActivatorRequest, Timeline } from "./activator-protocol.ts";

/** Wall-clock milliseconds with sub-millisecond precision, comparable across processes. */
const now = () => performance.timeOrigin + performance.now();

const file = process.argv[2];
if (!file || !process.send) {
  console.error("usage: activator-process.ts <snooze.yaml> (started by the benchmark with IPC)");
  process.exit(2);
}
const config = parseConfig(readFileSync(file, "utf8"), file);
const timelines = new Map<string, Timeline>();
const timeline = (model: string) => {
  const entry = timelines.get(model) ?? {};
  timelines.set(model, entry);
  return entry;
};

// The real local platform, with the time each wake took recorded around the engine's wake call.
const local = new LocalPlatform(config.models.values(), silentLogger);
let heldNow: (model: string) => number = () => 0;
const platform: Platform = {
  replicaSet: (model) => local.replicaSet(model),
  scale: (model, expected, to, remove) => local.scale(model, expected, to, remove),
  recordTier: (model, replica, recorded) => local.recordTier(model, replica, recorded),
  onChange: (listener) => local.onChange(listener),
  close: () => local.close(),
  engine(replica: Replica) {
    const engine = local.engine(replica);
    const model = replica.id.slice(0, replica.id.lastIndexOf("-"));
    return Object.assign(Object.create(engine), {
      async wake(level: 1 | 2, timeoutMs: number) {
        const entry = timeline(model);
        entry.wakeStart = now();
        try {
          await engine.wake(level, timeoutMs);
        } finally {
          entry.wakeEnd = now();
          entry.heldAtWakeEnd = heldNow(model);
        }
      },
      async warmup(name: string, timeoutMs: number) {
        const entry = timeline(model);
        entry.warmupStart = now();
        try {
          await engine.warmup(name, timeoutMs);
        } finally {
          entry.warmupEnd = now();
        }
      },
    });
  },
};

// When the activator handed each proxied chat request to its engine connection pool, when the
// engine's headers came back, and how many connections it opened: from undici's diagnostics
// channels, so the activator's own code stays untouched. (Warm-ups use another path.)
const proxied = { dispatched: [] as number[], upstreamHeaders: [] as number[], connects: 0 };
const isProxied = (message: unknown) =>
  (message as { request?: { path?: string } }).request?.path?.startsWith("/v1/chat/") === true;
diagnostics.subscribe("undici:request:create", (message) => {
  if (isProxied(message)) proxied.dispatched.push(now());
});
diagnostics.subscribe("undici:request:headers", (message) => {
  if (isProxied(message)) proxied.upstreamHeaders.push(now());
});
diagnostics.subscribe("undici:client:beforeConnect", () => {
  proxied.connects++;
});

const snooze = await startLocalSnooze({ config, log: silentLogger, host: "127.0.0.1", port: 0, platform });
heldNow = (model) => snooze.activator.routes.get(model)?.held ?? 0;
/**
 * When a starting engine first answers /health, asked every millisecond (bounded: 60 s): the moment
 * Snooze could know it is up at best, to which its own readiness polling is compared.
 */
async function probeListening(model: string, address: string) {
  const deadline = Date.now() + 60_000;
  while (Date.now() < deadline) {
    try {
      const response = await fetch(`http://${address}/health`, { signal: AbortSignal.timeout(1_000) });
      await response.body?.cancel();
      if (response.ok) {
        timeline(model).listening = now();
        return;
      }
    } catch {}
    await new Promise((resolve) => setTimeout(resolve, 1));
  }
}
const probing = new Set<string>();
snooze.autoscaler.watch((event) => {
  const entry = timeline(event.model);
  if (event.tier === "starting" && event.address && !probing.has(event.replica)) {
    probing.add(event.replica);
    void probeListening(event.model, event.address);
  }
  if (event.tier === "waking" || event.tier === "starting") entry.activationStart = now();
  if (event.tier === "ready") entry.ready = now();
});

// Every collection's pause of the main thread, summed: what the request path's garbage costs it.
const gcPauses = { count: 0, ms: 0 };
// The same while the loop delay is watched: whether a late turn was a collection's pause.
let windowGc = { ms: 0, maxMs: 0 };
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gcPauses.count++;
    gcPauses.ms += entry.duration;
    windowGc.ms += entry.duration;
    windowGc.maxMs = Math.max(windowGc.maxMs, entry.duration);
  }
}).observe({ entryTypes: ["gc"] });

let loopDelay: ELDHistogram | undefined;
const loopDelayPeriodMs = 10;

type GcOptions = { type: "major"; execution: "sync"; flavor: "last-resort" };
const gc = (globalThis as { gc?: (options?: GcOptions) => void }).gc;

async function answer(request: ActivatorRequest): Promise<ActivatorReply> {
  switch (request.cmd) {
    case "memory": {
      if (!gc) throw new Error("start with --expose-gc");
      // Twice, with a turn of the event loop between: weak callbacks and finalizers run after the first.
      gc();
      await new Promise((resolve) => setImmediate(resolve));
      gc();
      const regular = process.memoryUsage();
      // Then V8's memory-reducing collection, which also shrinks the young generation: V8 grows it
      // to tens of MiB under a burst of arrivals and shrinks it once allocation calms down, so after
      // a regular collection RSS per held request swings by several KiB between runs of one build.
      gc({ type: "major", execution: "sync", flavor: "last-resort" });
      return { memory: { regular, reduced: process.memoryUsage() } };
    }
    case "route": {
      const route = snooze.activator.routes.get(request.model);
      if (!route) throw new Error(`no model ${request.model}`);
      return {
        route: {
          held: route.held,
          inFlight: route.inFlight,
          tier: route.tier,
          address: route.latestEvent?.address,
        },
      };
    }
    case "timeline": {
      const entry = { ...timeline(request.model), ...proxied };
      timelines.delete(request.model);
      proxied.dispatched = [];
      proxied.upstreamHeaders = [];
      proxied.connects = 0;
      return { timeline: entry };
    }
    case "loop-delay": {
      if (request.phase === "start") {
        loopDelay?.disable();
        loopDelay = monitorEventLoopDelay({ resolution: loopDelayPeriodMs });
        loopDelay.enable();
        windowGc = { ms: 0, maxMs: 0 };
        return {};
      }
      if (!loopDelay) throw new Error("loop-delay stop without a start");
      loopDelay.disable();
      // The histogram holds the intervals between the timer's runs: what exceeds its period is delay.
      const ms = (ns: number) => Math.max(0, ns / 1e6 - loopDelayPeriodMs);
      const reading = {
        p50Ms: ms(loopDelay.percentile(50)),
        p99Ms: ms(loopDelay.percentile(99)),
        maxMs: ms(loopDelay.max),
        gcMs: windowGc.ms,
        gcMaxMs: windowGc.maxMs,
      };
      loopDelay = undefined;
      return { loopDelay: reading };
    }
    case "gc":
      return { gc: { ...gcPauses } };
    case "close":
      await snooze.close(2_000);
      setImmediate(() => process.exit(0));
      return {};
  }
}

process.on("message", (message: { id: number; request: ActivatorRequest }) => {
  answer(message.request).then(
    (reply) => process.send!({ id: message.id, reply }),
    (error: Error) => process.send!({ id: message.id, error: error.message }),
  );
});
// The benchmark went away: do not leave engines behind.
process.on("disconnect", () => {
  void snooze.close(0).finally(() => process.exit(0));
});
process.send({ ready: snooze.url, pid: process.pid });
