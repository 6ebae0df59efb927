/**
 * Renders benchmark results as Markdown for the `bench` section of
 * docs/benchmarks.md (written with the section writer `npm run bench:slots`
 * uses too, so each run replaces only its own section).
 */
import type { ActivationResult } from "./activation.ts";
import type { IdleRssResult } from "./idle-rss.ts";
import type { MachineFacts } from "./machine.ts";
import type { MemoryResult } from "./memory.ts";
import { fmt } from "./stats.ts";
import type { StreamingResult } from "./streaming.ts";
import type { SwapResult } from "./swap.ts";
import type { WarmPathResult } from "./warm-path.ts";

/** The section of docs/benchmarks.md this benchmark owns: `<!-- bench:begin -->` … `<!-- bench:end -->`. */
export const sectionName = "bench";

export interface BenchResults {
  command: string;
  quick: boolean;
  code: string;
  machine: MachineFacts;
  /** The peer's version when BENCH_LLAMA_SWAP named a checkout; undefined when it was not run. */
  llamaSwap?: string;
  seconds: number;
  warmPath?: WarmPathResult;
  activation?: ActivationResult;
  /** One run per stream count, fewest first; the targets are judged on the last. */
  streaming?: StreamingResult[];
  memory?: MemoryResult;
  idleRss?: IdleRssResult;
  swap?: SwapResult;
}

/** Issue 14's targets (docs/benchmarks.md). */
export const targets = {
  addedP50Us: 150,
  throughputRatio: 0.5,
  activationP50Ms: 10,
  /** The last of the held requests answered within this many times the engine's own time for them. */
  lastHeldRatio: 1.2,
  /** Activator CPU per streamed chunk over nginx's (one worker). */
  chunkCpuRatio: 1,
  streamingRatio: 0.5,
  /** Activator chunks/s over llama-swap's, 1,000 streams. */
  streamingVsLlamaSwap: 1,
  /** Every one of 1,000 streams has its first event within this long of its request. */
  firstEventMs: 1000,
  /** The admin API and /healthz answer within this long while 1,000 streams run. */
  adminMs: 100,
  heldBytes: 16 * 1024,
  idleSimMiB: 60,
  idleServeMiB: 80,
};

const kib = (bytes: number) => (Number.isFinite(bytes) ? `${fmt(bytes / 1024, 1)} KiB` : "—");
const verdict = (ok: boolean) => (ok ? "met" : "**missed**");
const table = (head: string[], rows: string[][]) =>
  [
    `| ${head.join(" | ")} |`,
    `| ${head.map(() => "---").join(" | ")} |`,
    ...rows.map((r) => `| ${r.join(" | ")} |`),
  ].join("\n");

function summary(r: BenchResults): string {
  const rows: string[][] = [];
  if (r.warmPath) {
    const activator = r.warmPath.summaries.find((s) => s.target === "activator")!;
    rows.push([
      "Warm path: p50 added vs direct",
      `${fmt(activator.addedP50Us, 0)} µs (p99 added ${fmt(activator.addedP99Us, 0)} µs)`,
      `≤ ${targets.addedP50Us} µs`,
      verdict(activator.addedP50Us <= targets.addedP50Us),
    ]);
    rows.push([
      "Warm path: requests/s vs nginx (1 worker)",
      `${fmt(r.warmPath.throughputVsNginx1)}× (vs nginx auto: ${fmt(r.warmPath.throughputVsNginxAuto)}×)`,
      `≥ ${targets.throughputRatio}×`,
      verdict(r.warmPath.throughputVsNginx1 >= targets.throughputRatio),
    ]);
    rows.push([
      "Warm path: requests/s vs nginx (1 worker) of Node itself, without Snooze",
      `bytes relayed, no HTTP: ${fmt(r.warmPath.nodeVsNginx1.relay)}×; HTTP framed by hand on raw sockets: ${fmt(r.warmPath.nodeVsNginx1.framed)}×; node:http + undici: ${fmt(r.warmPath.nodeVsNginx1.minimal)}×`,
      "—",
      "",
    ]);
    const peer = r.warmPath.summaries.find((s) => s.target === "llama-swap");
    if (peer && r.warmPath.throughputVsLlamaSwap !== undefined)
      rows.push([
        "Warm path: requests/s vs llama-swap",
        `${fmt(r.warmPath.throughputVsLlamaSwap)}× (p50 added: activator ${fmt(activator.addedP50Us, 0)} µs, llama-swap ${fmt(peer.addedP50Us, 0)} µs)`,
        "—",
        "",
      ]);
  }
  if (r.activation) {
    const a = r.activation.activator;
    // Every held request's wait, not the issue's target (that is the first one's first byte, the
    // next rows): it is mostly the engine answering the whole burst, shown beside it.
    rows.push([
      `Activation overhead, each of ${r.activation.count} held: TTFB less the wake and warm-up, p50`,
      `${fmt(a.overhead.p50, 1)} ms (p99 ${fmt(a.overhead.p99, 1)} ms); activator's own release: ${fmt(a.dispatched.p50, 1)} ms p50; the same burst sent to the awake engine directly: ${fmt(r.activation.engineBurst.p50, 1)} ms p50`,
      "—",
      "",
    ]);
    rows.push([
      "Activation: engine ready → first held request's first byte, warm-up apart",
      `after a wake ${fmt(a.firstByteMs, 1)} ms${r.activation.cold ? `; after a cold start ${fmt(r.activation.cold.firstByteMs, 1)} ms (of it ${fmt(r.activation.cold.detectMs, 1)} ms to learn the engine is up)` : ""}`,
      `≤ ${targets.activationP50Ms} ms`,
      verdict(
        a.firstByteMs <= targets.activationP50Ms &&
          (!r.activation.cold || r.activation.cold.firstByteMs <= targets.activationP50Ms),
      ),
    ]);
    rows.push([
      "Activation: Snooze's own part of that first byte (ready → sent to the engine, engine's headers → client)",
      `${fmt(a.ownFirstByteMs, 1)} ms after a wake${r.activation.cold ? `, ${fmt(r.activation.cold.ownFirstByteMs, 1)} ms after a cold start (learning it is up included)` : ""}; the engine's own first byte for the same burst sent to it directly: ${fmt(r.activation.engineBurst.firstMs, 1)} ms`,
      `≤ ${targets.activationP50Ms} ms`,
      verdict(
        a.ownFirstByteMs <= targets.activationP50Ms &&
          (!r.activation.cold || r.activation.cold.ownFirstByteMs <= targets.activationP50Ms),
      ),
    ]);
    const lastRatio = a.lastByteMs / r.activation.engineBurst.lastMs;
    rows.push([
      `Activation: the last of ${r.activation.count} held answered, after ready, over the same burst sent to the awake engine directly`,
      `${fmt(lastRatio)}× (${fmt(a.lastByteMs, 0)} ms against ${fmt(r.activation.engineBurst.lastMs, 0)} ms)`,
      `≤ ${targets.lastHeldRatio}×`,
      verdict(lastRatio <= targets.lastHeldRatio),
    ]);
    const peer = r.activation.llamaSwapCold;
    if (peer && r.activation.cold)
      rows.push([
        `Cold start, ${r.activation.count} held: first sent → last answered, vs llama-swap (same engine)`,
        `${fmt(r.activation.cold.allMs / peer.allMs)}× (${fmt(r.activation.cold.allMs, 0)} ms against ${fmt(peer.allMs, 0)} ms; failed: ${r.activation.cold.failures} against ${peer.failures})`,
        "—",
        "",
      ]);
  }
  const streamingRuns = r.streaming ?? [];
  /** A target's CPU per chunk over nginx's (one worker) in one streaming run. */
  const chunkCpuOverNginx = (run: StreamingResult, target: string) => {
    const cpu = (name: string) => run.summaries.find((x) => x.target === name)?.cpuUsPerEvent ?? Number.NaN;
    return cpu(target) / cpu("nginx-1w");
  };
  for (const other of streamingRuns.slice(0, -1)) {
    rows.push([
      `Streaming, ${other.streams} streams: chunks/s and CPU per chunk`,
      `${fmt(other.rateVsNginx1)}× nginx's chunk rate${other.rateVsLlamaSwap === undefined ? "" : `, ${fmt(other.rateVsLlamaSwap)}× llama-swap's`}; ${fmt(chunkCpuOverNginx(other, "activator"))}× nginx's CPU per chunk`,
      "—",
      "",
    ]);
  }
  const streaming = streamingRuns.at(-1);
  if (streaming) {
    rows.push([
      `Streaming: chunks/s vs nginx (1 worker), ${streaming.streams} streams`,
      `${fmt(streaming.rateVsNginx1)}× (vs nginx auto: ${fmt(streaming.rateVsNginxAuto)}×)`,
      `≥ ${targets.streamingRatio}×`,
      verdict(streaming.rateVsNginx1 >= targets.streamingRatio),
    ]);
    const chunkCpu = chunkCpuOverNginx(streaming, "activator");
    const nodeChunkCpu = chunkCpuOverNginx(streaming, "node-minimal");
    const relayChunkCpu = chunkCpuOverNginx(streaming, "node-relay");
    rows.push([
      `Streaming: CPU per chunk vs nginx (1 worker), ${streaming.streams} streams`,
      `${fmt(chunkCpu)}× (the minimal Node.js proxy: ${fmt(nodeChunkCpu)}×; Node relaying bytes with no HTTP: ${fmt(relayChunkCpu)}×)`,
      `≤ ${targets.chunkCpuRatio}×`,
      verdict(chunkCpu <= targets.chunkCpuRatio),
    ]);
    const summaryOf = (name: string) => streaming.summaries.find((x) => x.target === name);
    const activator = summaryOf("activator");
    const nginx = summaryOf("nginx-1w");
    if (activator) {
      const first = activator.firstEventMs;
      rows.push([
        `Streaming: each stream's first event after its request, ${streaming.streams} streams (all live through the window)`,
        `max ${seconds(first.max)}, p99 ${seconds(first.p99)}; ${activator.streamsLive}/${streaming.streams} live${nginx ? ` (nginx 1 worker: max ${seconds(nginx.firstEventMs.max)})` : ""}`,
        `≤ ${fmt(targets.firstEventMs / 1000, 0)} s`,
        verdict(first.max <= targets.firstEventMs && activator.streamsLive === streaming.streams),
      ]);
    }
    const admin = activator?.admin;
    if (admin)
      rows.push([
        `Streaming: admin API and \`/healthz\` during ${streaming.streams} streams`,
        `p50 ${fmt(admin.p50Ms, 1)} ms, max ${fmt(admin.maxMs, 1)} ms; event-loop delay p99 ${fmt(admin.loopDelay.p99Ms, 1)} ms`,
        `≤ ${targets.adminMs} ms`,
        verdict(admin.maxMs <= targets.adminMs),
      ]);
    const peer = streaming.rateVsLlamaSwap;
    rows.push([
      `Streaming: chunks/s vs llama-swap, ${streaming.streams} streams`,
      peer === undefined ? "not run (BENCH_LLAMA_SWAP names no checkout)" : `${fmt(peer)}×`,
      `≥ ${targets.streamingVsLlamaSwap}×`,
      peer === undefined ? "not judged" : verdict(peer >= targets.streamingVsLlamaSwap),
    ]);
  }
  if (r.memory) {
    const largest = r.memory.steps.filter((s) => s.build === "this").at(-1)!;
    const peer = r.memory.steps.find((s) => s.build === "llama-swap" && s.held === largest.held);
    rows.push([
      `Memory per held request with its connection, ${largest.held} held`,
      `RSS ${kib(largest.rssPerConnection)}; heap ${kib(largest.heapPerConnection)}, of it ${kib(largest.heapPerRequest)} the request's${peer ? `; llama-swap RSS ${kib(peer.rssPerConnection)}` : ""}`,
      "≤ 16 KiB",
      verdict(largest.rssPerConnection <= targets.heldBytes),
    ]);
  }
  if (r.idleRss) {
    const mib = (bytes: number) => `${fmt(bytes / 2 ** 20, 1)} MiB`;
    const sim = r.idleRss.rows.find((x) => x.target === "snooze sim")!;
    const serve = r.idleRss.rows.find((x) => x.target.startsWith("snooze serve (3"))!;
    rows.push([
      "Idle RSS, `snooze sim`",
      `${mib(sim.rss)} (anon ${mib(sim.anon)}; first run ${mib(sim.firstRss)})`,
      `≤ ${targets.idleSimMiB} MiB`,
      verdict(sim.rss <= targets.idleSimMiB * 2 ** 20),
    ]);
    rows.push([
      "Idle RSS, `snooze serve` (3 models)",
      `${mib(serve.rss)} (anon ${mib(serve.anon)}; first run ${mib(serve.firstRss)})`,
      `≤ ${targets.idleServeMiB} MiB`,
      verdict(serve.rss <= targets.idleServeMiB * 2 ** 20),
    ]);
    const peer = r.idleRss.rows.find((x) => x.target.startsWith("llama-swap (3"));
    if (peer)
      rows.push(["Idle RSS, llama-swap (3 models)", `${mib(peer.rss)} (anon ${mib(peer.anon)})`, "—", ""]);
  }
  if (r.swap) {
    const mine = r.swap.sides.find((x) => x.target === "activator")!;
    const theirs = r.swap.sides.find((x) => x.target === "llama-swap");
    rows.push([
      "Swap between two models on one slot: request answered, p50",
      `${fmt(mine.p50Ms, 0)} ms${theirs ? `; llama-swap ${fmt(theirs.p50Ms, 0)} ms (${fmt(r.swap.vsLlamaSwap!)}×)` : "; llama-swap not run"}; the engine's sleep + wake ${fmt(r.swap.engine.sleepMs + r.swap.engine.wakeMs, 0)} ms, its load ${fmt(r.swap.engine.loadMs, 0)} ms`,
      "—",
      "",
    ]);
  }
  return table(["What", "Measured", "Target", ""], rows);
}

/** The activators' garbage-collection pauses at 64 connections, as one sentence (empty when not read). */
function gcPauses(w: WarmPathResult): string {
  const read = w.summaries.filter((s) => s.gcPauseUsPerRequest !== undefined);
  if (read.length === 0) return "";
  const parts = read.map((s) => `${s.target} ${fmt(s.gcPauseUsPerRequest!, 1)} µs`);
  return ` Garbage collection paused the activator's main thread per request under the ${w.throughputConnections} connections (its pauses over the run, from \`PerformanceObserver\`, over its requests): ${parts.join(", ")}.`;
}

function warmPathSection(w: WarmPathResult): string {
  const rows = w.summaries.map((s) => [
    s.target,
    fmt(s.p50Us, 0),
    fmt(s.p99Us, 0),
    s.target === "direct" ? "—" : fmt(s.addedP50Us, 0),
    s.target === "direct" ? "—" : fmt(s.addedP99Us, 0),
    fmt(s.requestsPerSecond, 0),
    s.target === "direct" ? "—" : fmt(s.cpuUsPerRequest, 1),
    String(s.errors),
  ]);
  return `#### Warm path

${w.rounds} interleaved rounds; latency: wrk, 1 connection, ${w.latencySeconds} s per target per round;
throughput: wrk, ${w.throughputConnections} connections, ${w.throughputSeconds} s. Medians over rounds (added = same-round difference to direct).

${table(["target", "p50 µs", "p99 µs", "p50 added µs", "p99 added µs", "requests/s", "proxy CPU µs/request", "errors"], rows)}

Activator throughput over nginx: ${fmt(w.throughputVsNginx1)}× nginx with 1 worker, ${fmt(w.throughputVsNginxAuto)}× nginx with a worker per core;
${fmt(w.throughputVsNodeMinimal)}× the minimal Node.js proxy${w.throughputVsLlamaSwap === undefined ? "" : `; ${fmt(w.throughputVsLlamaSwap)}× llama-swap`}.${gcPauses(w)}${
    w.vsBaseline
      ? `

This build over the baseline checkout (\`activator-baseline\`, BENCH_BASELINE), medians of the
same-round ratios: ${fmt(w.vsBaseline.requestsPerSecond)}× the requests/s, ${fmt(w.vsBaseline.cpuPerRequest)}× the CPU per request, p50 ${fmt(w.vsBaseline.addedP50Us, 0)} µs apart.`
      : ""
  }`;
}

function activationSection(a: ActivationResult): string {
  const x = a.activator;
  const rows = [
    ["activator (TTFB − engine's wake and warm-up)", fmt(x.overhead.p50, 1), fmt(x.overhead.p99, 1)],
    ["activator, raw TTFB", fmt(x.ttfb.p50, 1), fmt(x.ttfb.p99, 1)],
    ["… after ready: request handed to the engine pool", fmt(x.dispatched.p50, 1), fmt(x.dispatched.p99, 1)],
    [
      "… after ready: engine's headers back at the activator",
      fmt(x.upstreamHeaders.p50, 1),
      fmt(x.upstreamHeaders.p99, 1),
    ],
    ["… after ready: headers at the client", fmt(x.clientHeaders.p50, 1), fmt(x.clientHeaders.p99, 1)],
    ...(a.cold
      ? [
          [
            "cold start: TTFB after the engine listened, less the warm-up",
            fmt(a.cold.overhead.p50, 1),
            fmt(a.cold.overhead.p99, 1),
          ],
        ]
      : []),
    [
      "engine alone, awake: same burst on new connections (TTFB)",
      fmt(a.engineBurst.p50, 1),
      fmt(a.engineBurst.p99, 1),
    ],
    [
      "engine alone, asleep: parked in it, first byte − end of wake",
      fmt(a.engineParked.p50, 1),
      fmt(a.engineParked.p99, 1),
    ],
  ];
  return `#### Activation overhead

${a.rounds} rounds of ${a.count} concurrent requests (non-streaming, \`max_tokens: 1\`) to a model asleep at level 1
for ${fmt(a.idleBeforeMs / 1000, 1)} s; engine: \`snooze sim\`, wake ${fmt(x.wakeMs, 0)} ms (median measured around the
wake call), warm-up ${fmt(x.warmupMs, 1)} ms, first request to wake call ${fmt(x.decisionMs, 1)} ms; held when the engine
had woken: ${x.held}; failed requests: ${x.failures + a.engineBurst.failures + a.engineParked.failures}; connections the activator opened to the engine per round: ${fmt(x.connects, 0)};
connection attempts dropped on full accept queues during the activator's rounds (machine-wide \`ListenOverflows\`, each a SYN
retransmission of ≥ 1 s for its request): ${x.listenOverflows}.
First held request's first byte, from the engine being ready and with the warm-up taken out: ${fmt(x.firstByteMs, 1)} ms after
a wake (ready = \`/is_sleeping\` false)${
    a.cold
      ? `; after a cold start (same ${a.count} held; ready = the first \`/health\` answer of a prober asking every millisecond) ${fmt(a.cold.firstByteMs, 1)} ms, of which ${fmt(a.cold.detectMs, 1)} ms until Snooze learned the engine was up (engine start ${fmt(a.cold.startMs, 0)} ms, warm-up ${fmt(a.cold.warmupMs, 1)} ms); failed: ${a.cold.failures}`
      : ""
  }.${
    a.cold
      ? ` After a cold start all ${a.count} were answered ${fmt(a.cold.allMs, 0)} ms after the first was sent: the engine listened ${fmt(a.cold.sentToListeningMs, 0)} ms after it, the last answer came ${fmt(a.cold.lastByteMs, 0)} ms after that (warm-up included).`
      : ""
  }${
    a.llamaSwapCold
      ? ` llama-swap (no sleep mode: a cold start is its only activation), the same burst at the same engine stopped: all answered ${fmt(a.llamaSwapCold.allMs, 0)} ms after the first was sent, the engine listening ${fmt(a.llamaSwapCold.sentToListeningMs, 0)} ms after it; first byte ${fmt(a.llamaSwapCold.firstByteMs, 1)} ms and last ${fmt(a.llamaSwapCold.lastByteMs, 0)} ms after the engine's first \`/health\` answer (a prober outside asking every millisecond); failed: ${a.llamaSwapCold.failures}.`
      : ""
  } Peak RSS over the scenario: the activator process ${fmt(a.peakRss.activator / 2 ** 20, 1)} MiB${a.peakRss.llamaSwap ? `, llama-swap ${fmt(a.peakRss.llamaSwap / 2 ** 20, 1)} MiB` : ""} (engines apart).

${table(["ms", "p50", "p99"], rows)}`;
}

/** Milliseconds as seconds; a wait that never ended as "never". */
const seconds = (ms: number) => (Number.isFinite(ms) ? `${fmt(ms / 1000, 2)} s` : "never");

function streamingSection(s: StreamingResult): string {
  const rows = s.summaries.map((x) => [
    x.target,
    fmt(x.eventsPerSecond, 0),
    x.target === "direct" ? "—" : fmt(x.cpuUsPerEvent, 2),
    x.target === "direct" ? "—" : fmt(x.cores, 2),
    x.target === "direct" ? "—" : fmt(x.peakRss / 2 ** 20, 1),
    `${x.streamsLive}/${s.streams}`,
    Number.isNaN(x.allStartedSeconds) ? "never" : fmt(x.allStartedSeconds, 2),
    `${seconds(x.firstEventMs.p99)} / ${seconds(x.firstEventMs.max)}`,
    String(x.errors.length),
  ]);
  const admin = s.summaries.find((x) => x.target === "activator")?.admin;
  return `#### Streaming, ${s.streams} streams

${s.rounds} interleaved rounds; ${s.streams} concurrent SSE streams, engine step every ${s.itlMs} ms (at most
${fmt(s.offeredPerSecond, 0)} chunks/s offered; the direct row is what the engine managed), ${s.windowSeconds} s counting window per target.
${s.pinned ? `Client and engine pinned to CPU ${s.pinned.load}, the proxy under test (every thread, nginx's workers too) to CPU ${s.pinned.proxy}.` : "Not pinned to CPUs: client, engine and proxy share the cores (`BENCH_PIN_CPUS=1` pins them)."}

${table(["target", "chunks/s delivered", "proxy CPU µs/chunk", "proxy cores", "proxy peak RSS MiB", "streams live", "all first events, s", "a stream's first event, p99 / max", "errors"], rows)}

${
  s.vsBaseline
    ? `This build over the baseline checkout (\`activator-baseline\`, BENCH_BASELINE), medians of the same-round ratios: ${fmt(s.vsBaseline.rate)}× the chunk rate, ${fmt(s.vsBaseline.cpuPerChunk)}× the CPU per chunk.

`
    : ""
}Activator chunk rate over nginx: ${fmt(s.rateVsNginx1)}× nginx with 1 worker, ${fmt(s.rateVsNginxAuto)}× with a worker per core${s.rateVsLlamaSwap === undefined ? "" : `; ${fmt(s.rateVsLlamaSwap)}× llama-swap`}.${
    admin
      ? ` Meanwhile the activator's \`/snooze/v1/models\` and \`/healthz\`, asked in turn every 50 ms through the window: p50 ${fmt(admin.p50Ms, 1)} ms, max ${fmt(admin.maxMs, 1)} ms (${admin.probes} answers); its event loop ran a 10 ms timer late by p50 ${fmt(admin.loopDelay.p50Ms, 1)} ms, p99 ${fmt(admin.loopDelay.p99Ms, 1)} ms, max ${fmt(admin.loopDelay.maxMs, 1)} ms, and collections paused it for ${fmt(admin.loopDelay.gcMs, 0)} ms of the window, ${fmt(admin.loopDelay.gcMaxMs, 1)} ms at the longest (the median round).`
      : ""
  }`;
}

function memorySection(m: MemoryResult): string {
  // With a baseline checkout measured beside this one (BENCH_BASELINE), a column says whose row it is.
  const builds = new Set(m.steps.map((s) => s.build)).size > 1;
  const rows = m.steps.map((s) => [
    ...(builds ? [s.build] : []),
    String(s.held),
    kib(s.heapPerRequest),
    kib(s.externalPerRequest),
    kib(s.rssPerRequest),
    kib(s.heapPerConnection),
    kib(s.rssPerConnection),
  ]);
  const header = [
    ...(builds ? ["build"] : []),
    "held",
    "heap / request",
    "external / request",
    "RSS / request",
    "heap / request + connection",
    "RSS / request + connection",
  ];
  return `#### Memory per held request

${table(header, rows)}`;
}

function idleRssSection(m: IdleRssResult): string {
  const mib = (bytes: number) => fmt(bytes / 2 ** 20, 1);
  const baseline = m.rows.find((r) => r.target === "node -e (HTTP server)")!;
  const rows = m.rows.map((r) => [
    r.target,
    mib(r.rss),
    mib(r.anon),
    `${fmt(r.rss / baseline.rss)}×`,
    mib(r.firstRss),
  ]);
  return `#### Idle memory

Each process started, given ${fmt(m.settleMs / 1000, 1)} s, its resident set read from \`/proc/<pid>/status\`; ${m.rounds} interleaved
rounds with a compile cache of their own, the first of which fills it (its figure is the "first run" column: the type
stripper loaded, every file compiled); the other columns are medians of the later rounds. RSS includes the node binary's
pages, shared by every process running it; RssAnon is what each more engine adds. The serve configs' engines are never
started. Targets (issue 14): \`snooze sim\` ≤ ${targets.idleSimMiB} MiB, \`snooze serve\` ≤ ${targets.idleServeMiB} MiB.${m.rows.some((r) => r.target.endsWith(", baseline")) ? " The baseline row is BENCH_BASELINE's checkout, in the same rounds." : ""}

${table(["process", "RSS MiB", "RssAnon MiB", "RSS vs node HTTP server", "first run RSS MiB"], rows)}`;
}

function swapSection(w: SwapResult): string {
  const rows = w.sides.map((x) => [
    x.target,
    fmt(x.p50Ms, 0),
    fmt(x.maxMs, 0),
    String(x.swapsMs.length),
    String(x.failures),
  ]);
  return `#### Swap between two models on one slot

Two models on one slot, requests alternating between them one at a time after both started once
(${w.swaps} swaps per target), so each request waits for a swap. Engines: \`snooze sim\` with load
${fmt(w.engine.loadMs, 0)} ms, sleep ${fmt(w.engine.sleepMs, 0)} ms, wake ${fmt(w.engine.wakeMs, 0)} ms (level 1), no token time. Snooze: slot policy
\`fifo\` (the incumbent is put to sleep, the other woken and warmed up); llama-swap: its default, one
model at a time (the incumbent is stopped, the other started).

${table(["target", "p50 ms", "max ms", "swaps", "failed"], rows)}`;
}

export function renderResults(r: BenchResults): string {
  const m = r.machine;
  const parts = [
    `Measured ${m.date} UTC in ${fmt(r.seconds / 60, 1)} min${r.quick ? " (**--quick**: a smoke run, not a measurement)" : ""} with:`,
    "",
    "```sh",
    r.command,
    "```",
    "",
    `Machine: ${m.cores} cores (${m.cpuModel}), ${m.memoryGiB} GiB, shared with other work (load average ${m.loadAverage} at the start);`,
    `Node ${m.node}, nginx ${m.nginx}, wrk ${m.wrk}; code ${r.code}; ${r.llamaSwap ? `llama-swap ${r.llamaSwap} (built from its source checkout, \`BENCH_LLAMA_SWAP\`)` : "llama-swap not run (`BENCH_LLAMA_SWAP` names no checkout)"}.`,
    "",
    summary(r),
  ];
  if (r.warmPath) parts.push("", warmPathSection(r.warmPath));
  if (r.activation) parts.push("", activationSection(r.activation));
  for (const run of r.streaming ?? []) parts.push("", streamingSection(run));
  if (r.memory) parts.push("", memorySection(r.memory));
  if (r.idleRss) parts.push("", idleRssSection(r.idleRss));
  if (r.swap) parts.push("", swapSection(r.swap));
  return parts.join("\n");
}
