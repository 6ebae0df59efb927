/**
 * A bounded, seeded chaos run against a real `snooze serve` with `snooze sim` engines: clients (the
 * `openai` SDK, streaming and not, some aborted while held, at the first byte or mid-stream) while a
 * driver, at seeded random moments, SIGKILLs engines, freezes them (SIGSTOP, then SIGCONT), asks the
 * admin API to wake, sleep and stop models, and reloads a changed configuration (SIGHUP). Checked
 * throughout and at the end: every request ends within a bound derived from the timeouts; never two
 * engines of the slot awake; after a quiet period each model's tier matches its engine; no orphan
 * or zombie engine; the open files of `snooze serve` back near where they began; SIGTERM exits within
 * its drain bound and leaves no engine. Exits 0 when every invariant held, 1 otherwise.
 *
 *   node hack/chaos.ts --seed 7 --duration 90s [--port 43080] [--dir <scratch dir>]
 *
 * With `--soak` (default duration 5m) it is a long-run probe for leaks instead: the same clients and
 * a gentler churn (no freezes), and every `--interval` (10s) a sample of the serve process (resident
 * memory, open files, threads, processes below it), its `/metrics` series (and any left for a
 * removed model) and its timeline; `--snapshots N` (3) heap snapshots, spread over the run, each
 * with clients paused; at the end the slopes per 1,000 requests after the first snapshot and the
 * heap's growth by constructor (hack/soak-measure.ts). The invariants are checked as in a chaos run.
 *
 * Not part of `npm test`: a run takes minutes and is meant for finding faults, each of which gets a
 * deterministic test of its own. See docs/reliability.md, "Chaos runs".
 */
import { type ChildProcess, spawn } from "node:child_process";
import {
  appendFileSync,
  createWriteStream,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import OpenAI from "openai";
import { Agent, setGlobalDispatcher } from "undici";
import { parseDuration } from "../lib/duration.ts";
import type { ProcStat } from "../lib/proc-stat.ts";
import { createRandom } from "./sim/random.ts";
import { simCommand } from "./sim/yaml-command.ts";
import {
  type HeapSummary,
  heapGrowth,
  heapSnapshots,
  processTable,
  sampleMetrics,
  sampleProcess,
  slope,
  summarizeHeapSnapshot,
} from "./soak-measure.ts";

const { values } = parseArgs({
  options: {
    seed: { type: "string", default: "1" },
    duration: { type: "string" },
    port: { type: "string", default: "43080" },
    dir: { type: "string" },
    soak: { type: "boolean", default: false },
    snapshots: { type: "string", default: "3" },
    interval: { type: "string", default: "10s" },
  },
});
const soak = values.soak!;
const seed = Number(values.seed);
// The driver's own idle connections to Snooze close within a second (Snooze keeps them 65 s), so
// the open files counted at the end are Snooze's, not the driver's kept-alive sockets.
setGlobalDispatcher(new Agent({ keepAliveTimeout: 1000, keepAliveMaxTimeout: 1000 }));
const durationMs = parseDuration(values.duration ?? (soak ? "5m" : "90s")) ?? 90_000;
const port = Number(values.port);
const random = createRandom(seed);
const pick = <T>(items: readonly T[]): T => items[Math.floor(random() * items.length)]!;
const between = (low: number, high: number) => low + random() * (high - low);
const dir = resolve(values.dir ?? mkdtempSync(join(tmpdir(), "snooze-chaos-")));
mkdirSync(dir, { recursive: true });
const stateDir = join(dir, "state");
const configFile = join(dir, "snooze.yaml");
const url = `http://127.0.0.1:${port}`;
const started = Date.now();
const elapsed = () => ((Date.now() - started) / 1000).toFixed(1);
const violations: string[] = [];
const violation = (what: string) => {
  violations.push(`${elapsed()}s ${what}`);
  console.log(`VIOLATION ${elapsed()}s ${what}`);
};
const note = (what: string) => console.log(`${elapsed()}s ${what}`);

// Timeouts every configuration variant keeps: the bounds below are derived from them.
const T = {
  holdBudget: 8,
  wakeTimeout: 4,
  startTimeout: 6,
  drainTimeout: 2,
  firstByte: 6,
  idle: 3,
  connect: 2,
};
const stopGraceS = 2;
const shutdownGraceS = 3;
// A request is held (holdBudget), sent, its engine fails under it before answering, it is held again
// (a new holdBudget), sent again, and then takes at most firstByte + idle per gap; small answers.
const requestBoundMs = (2 * T.holdBudget + 2 * T.firstByte + 2 * T.idle + T.drainTimeout + 5) * 1000;

const enginePorts = { a: port + 21, b: port + 22, c: port + 23, d: port + 24 } as const;
type ModelName = keyof typeof enginePorts;
const modelNames = Object.keys(enginePorts) as ModelName[];

/** One configuration variant: which models exist, which share the slot, their sleep levels. */
interface Variant {
  present: Set<ModelName>;
  inSlot: Set<ModelName>;
  level: Record<ModelName, 1 | 2>;
  wakeTimeout: number;
}
let variant: Variant = {
  present: new Set(modelNames),
  inSlot: new Set(["a", "b"]),
  level: { a: 1, b: 2, c: 1, d: 1 },
  wakeTimeout: T.wakeTimeout,
};

/** A sim engine for the run's settings: every delay at a fifth of the simulator's. */
const sim = (extra: string[]) => simCommand(extra, 0.2);

function yamlOf(v: Variant): string {
  const gpu = [
    "--gpu-id",
    "0",
    "--gpu-memory",
    "24GiB",
    "--model-memory",
    "16GiB",
    "--gpu-dir",
    join(dir, "gpu"),
  ];
  const lines = [
    "defaults:",
    "  sleepAfter: 3s",
    "  deepSleepAfter: 6s",
    "  zeroAfter: 15s",
    `  holdBudget: ${T.holdBudget}s`,
    `  startTimeout: ${T.startTimeout}s`,
    `  drainTimeout: ${T.drainTimeout}s`,
    `  firstByteTimeout: ${T.firstByte}s`,
    `  idleTimeout: ${T.idle}s`,
    `  connectTimeout: ${T.connect}s`,
    "  streamProgress: true",
    "slots:",
    "  gpu0:",
    "    minResidency: 500ms",
    "    maxWait: 3s",
    "    drainTimeout: 2s",
    "models:",
  ];
  for (const m of modelNames) {
    if (!v.present.has(m)) continue;
    const inSlot = v.inSlot.has(m);
    const extra = [
      "--enable-sleep-mode",
      "--load-time",
      "2s",
      "--sleep-time-l1",
      "4s",
      "--wake-time-l1",
      "4s",
      "--reload-time",
      "5s",
      ...(inSlot ? gpu : []),
    ];
    lines.push(`  ${m}:`, `    port: ${enginePorts[m]}`, `    wakeTimeout: ${v.wakeTimeout}s`);
    if (m === "d") {
      lines.push("    sleep: false", `    command: ${sim(["--load-time", "1s"])}`);
      continue;
    }
    if (inSlot) lines.push("    slot: gpu0");
    if (v.level[m] === 2) lines.push("    sleepLevel: 2");
    lines.push(`    command: ${sim(extra)}`);
  }
  return `${lines.join("\n")}\n`;
}

function mutate(v: Variant): { next: Variant; what: string } {
  const next: Variant = {
    ...v,
    present: new Set(v.present),
    inSlot: new Set(v.inSlot),
    level: { ...v.level },
  };
  const m = pick(["a", "b", "c"] as const);
  const change = pick(["presence", "slot", "slot", "level", "level", "timeout"] as const);
  if (change === "presence") {
    if (next.present.has(m) && next.present.size === modelNames.length) next.present.delete(m);
    else next.present.add(m);
    return { next, what: `${m} ${next.present.has(m) ? "added" : "removed"}` };
  }
  if (change === "slot") {
    if (next.inSlot.has(m)) next.inSlot.delete(m);
    else next.inSlot.add(m);
    return { next, what: `${m} ${next.inSlot.has(m) ? "into" : "out of"} the slot` };
  }
  if (change === "level") {
    next.level[m] = next.level[m] === 1 ? 2 : 1;
    return { next, what: `${m} sleep level ${next.level[m]}` };
  }
  next.wakeTimeout = next.wakeTimeout === T.wakeTimeout ? 3 : T.wakeTimeout;
  return { next, what: `wakeTimeout ${next.wakeTimeout}s` };
}

// --- processes -------------------------------------------------------------------------------

interface Proc extends ProcStat {
  /** Its command line, the arguments joined by spaces. */
  cmd: string;
}
function processes(): Proc[] {
  return processTable().flatMap((stat) => {
    try {
      return [{ ...stat, cmd: readFileSync(`/proc/${stat.pid}/cmdline`, "utf8").split("\0").join(" ") }];
    } catch {
      return [];
    }
  });
}
/** The simulator processes of this run (not their guards), by the port each serves. */
function engineProcs(): Map<ModelName, Proc[]> {
  const byModel = new Map<ModelName, Proc[]>();
  for (const p of processes()) {
    if (p.cmd.includes("engine-guard")) continue;
    for (const m of modelNames) {
      if (p.cmd.includes(" sim ") && p.cmd.includes(`--port ${enginePorts[m]}`)) {
        byModel.set(m, [...(byModel.get(m) ?? []), p]);
      }
    }
  }
  return byModel;
}
/** A socket's addresses from /proc/net (the inode in `socket:[inode]`), for a leak's report. */
function describeSocket(link: string): string {
  const inode = /^socket:\[(\d+)\]$/.exec(link)?.[1];
  if (!inode) return link;
  for (const table of ["tcp", "tcp6"]) {
    for (const line of readFileSync(`/proc/net/${table}`, "utf8").split("\n").slice(1)) {
      const f = line.trim().split(/\s+/);
      if (f[9] !== inode) continue;
      const portOf = (hexAddress: string) => Number.parseInt(hexAddress.split(":")[1]!, 16);
      return `tcp ${portOf(f[1]!)}->${portOf(f[2]!)} state ${f[3]}`;
    }
  }
  return `${link} (not tcp)`;
}
const openFiles = (pid: number) => readdirSync(`/proc/${pid}/fd`).length;
const stopped = new Set<number>();

// --- the admin API and the engines' own word ---------------------------------------------------

interface ModelView {
  id: string;
  tier: string;
  held: number;
  inFlight: number;
  replicas: { id: string; tier: string }[];
}
async function models(): Promise<ModelView[] | undefined> {
  try {
    const res = await fetch(`${url}/snooze/v1/models`, { signal: AbortSignal.timeout(2000) });
    return ((await res.json()) as { models: ModelView[] }).models;
  } catch {
    return undefined;
  }
}
async function isSleeping(m: ModelName): Promise<boolean | undefined> {
  try {
    const res = await fetch(`http://127.0.0.1:${enginePorts[m]}/is_sleeping`, {
      signal: AbortSignal.timeout(500),
    });
    if (!res.ok) return undefined;
    return ((await res.json()) as { is_sleeping: boolean }).is_sleeping;
  } catch {
    return undefined;
  }
}
const resident = new Set(["starting", "waking", "ready", "draining"]);

// --- clients -----------------------------------------------------------------------------------

const outcomes = new Map<string, number>();
const examples = new Map<string, string>();
const count = (key: string) => outcomes.set(key, (outcomes.get(key) ?? 0) + 1);
let running = true;
let open = 0;
/** Requests ended (the soak's measure of work done). */
let done = 0;
/** While set (a soak's heap snapshot), clients start no request and the driver injects no fault. */
let paused: Promise<void> | undefined;

async function oneRequest(client: OpenAI, id: number): Promise<void> {
  const model = random() < 0.7 ? pick(["a", "b"] as const) : pick(["c", "d"] as const);
  const stream = random() < 0.5;
  const abortAt = pick(["none", "none", "none", "none", "held", "first-byte", "mid-stream"] as const);
  const controller = new AbortController();
  const begun = Date.now();
  const watchdog = setTimeout(() => {
    violation(
      `request ${id} (${model}, stream ${stream}, abort ${abortAt}) still open after ${requestBoundMs} ms`,
    );
    controller.abort();
  }, requestBoundMs);
  if (abortAt === "held") setTimeout(() => controller.abort(), between(50, 1500));
  open++;
  try {
    const body = { model, messages: [{ role: "user" as const, content: `chaos ${id}` }], max_tokens: 24 };
    if (stream) {
      const events = await client.chat.completions.create(
        { ...body, stream: true },
        { signal: controller.signal, maxRetries: 0 },
      );
      let n = 0;
      for await (const _ of events) {
        n++;
        if (abortAt === "first-byte" && n === 1) controller.abort();
        if (abortAt === "mid-stream" && n === 6) controller.abort();
      }
      count(`${model} stream ok`);
    } else {
      await client.chat.completions.create(body, { signal: controller.signal, maxRetries: 0 });
      count(`${model} ok`);
    }
  } catch (error) {
    if (controller.signal.aborted || error instanceof OpenAI.APIUserAbortError) count("aborted");
    else if (error instanceof OpenAI.APIError && error.status !== undefined) {
      const code = (error.error as { code?: string } | undefined)?.code ?? error.code;
      if (!code)
        violation(`request ${id} (${model}): error ${error.status} without a reason: ${error.message}`);
      count(`${model} ${error.status} ${code}`);
      if (!examples.has(`${error.status} ${code}`))
        examples.set(`${error.status} ${code}`, `${elapsed()}s ${error.message}`);
    } else if (error instanceof OpenAI.APIError) {
      // A stream's error event, or a connection cut: the SDK raises it without a status.
      count(`${model} ${error.constructor.name}: ${String(error.message).slice(0, 60)}`);
    } else count(`${model} ${String(error).slice(0, 80)}`);
  } finally {
    clearTimeout(watchdog);
    open--;
    done++;
    if (Date.now() - begun > requestBoundMs) note(`request ${id} took ${Date.now() - begun} ms`);
  }
}

/**
 * A soak's status page watcher: opens the live event stream (`/snooze/v1/events/stream`), reads it
 * for a while and goes, again and again, so the timeline's subscribers come and go.
 */
async function watcherLoop(): Promise<void> {
  while (running) {
    if (paused) await paused;
    const controller = new AbortController();
    const timer = setTimeout(() => controller.abort(), between(200, 5000));
    try {
      const res = await fetch(`${url}/snooze/v1/events/stream`, { signal: controller.signal });
      count(`watcher ${res.status}`);
      for await (const _ of res.body ?? []) if (controller.signal.aborted) break;
    } catch {
      // Aborted: the watcher's own going.
    } finally {
      clearTimeout(timer);
    }
    await new Promise((r) => setTimeout(r, between(50, 1000)));
  }
}

async function clientLoop(n: number): Promise<void> {
  const client = new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: "none",
    maxRetries: 0,
    timeout: requestBoundMs * 2,
  });
  let id = n * 100_000;
  while (running) {
    if (paused) await paused;
    await oneRequest(client, id++);
    await new Promise((r) => setTimeout(r, between(20, 600)));
  }
}

// --- the driver's faults -------------------------------------------------------------------------

function signalEngine(m: ModelName, signal: NodeJS.Signals): boolean {
  const procs = engineProcs().get(m) ?? [];
  for (const p of procs) {
    try {
      process.kill(p.pid, signal);
    } catch {}
  }
  return procs.length > 0;
}

async function fault(serve: ChildProcess): Promise<void> {
  // A soak's churn is what a long-lived Snooze sees in use, and an engine now and then lost: no
  // freeze (a frozen engine holds requests for its timeouts, which a soak does not measure).
  const kind = soak
    ? pick(["kill", "admin", "admin", "reload", "reload", "swap", "swap"] as const)
    : pick(["kill", "kill", "freeze", "phase", "phase", "admin", "admin", "reload", "swap"] as const);
  const m = pick(modelNames);
  churn.set(kind, (churn.get(kind) ?? 0) + 1);
  if (kind === "phase") return void faultInPhase(m);
  if (kind === "kill") {
    if (signalEngine(m, "SIGKILL")) note(`SIGKILL engine ${m}`);
  } else if (kind === "freeze") {
    const ms = pick([500, 1500, 3000, 6000, 12000]);
    const procs = engineProcs().get(m) ?? [];
    if (procs.length === 0) return;
    note(`SIGSTOP engine ${m} for ${ms} ms`);
    freeze(m, procs, ms);
  } else if (kind === "admin") {
    const verb = pick(["wake", "sleep", "stop"] as const);
    note(`admin ${verb} ${m}`);
    fetch(`${url}/snooze/v1/models/${m}/${verb}`, {
      method: "POST",
      signal: AbortSignal.timeout(requestBoundMs),
    })
      .then(async (res) => {
        const text = await res.text();
        note(`admin ${verb} ${m}: ${res.status} ${text.slice(0, 120)}`);
        // 504 is a sleep taken back by a request that came for the model (docs/local-mode.md).
        if (res.status >= 500 && res.status !== 504)
          violation(`admin ${verb} ${m}: ${res.status} ${text.slice(0, 200)}`);
      })
      .catch((error) => violation(`admin ${verb} ${m}: ${error}`));
  } else if (kind === "reload") {
    const { next, what } = mutate(variant);
    for (const m of modelNames) {
      if (variant.present.has(m) && !next.present.has(m)) removedAt.set(m, Date.now());
      if (next.present.has(m)) removedAt.delete(m);
    }
    variant = next;
    writeFileSync(configFile, yamlOf(variant));
    lastReload = Date.now();
    serve.kill("SIGHUP");
    note(`SIGHUP: ${what}`);
  } else {
    // A burst for the slot's two members, interleaved, so swaps race with the rest.
    const client = new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
    note("swap burst a/b");
    for (let i = 0; i < 4; i++) void oneRequest(client, 900_000 + Math.floor(random() * 99_999));
  }
}
let lastReload = 0;
/** When each model not configured now was removed by a reload. */
const removedAt = new Map<ModelName, number>();
const churn = new Map<string, number>();

/**
 * A fault at a chosen phase of a model's tier change (its start, its wake and warm-up, its drain
 * and sleep call): the admin API is polled until the model is there, then its engine is killed or
 * frozen. Runs on its own, bounded to 5 s of looking.
 */
/** Freezes the engine's processes (SIGSTOP) and lets them go on (SIGCONT) after `ms`. */
function freeze(m: string, procs: readonly { pid: number }[], ms: number): void {
  for (const p of procs) {
    try {
      process.kill(p.pid, "SIGSTOP");
      stopped.add(p.pid);
    } catch {}
  }
  setTimeout(() => {
    for (const p of procs) {
      try {
        process.kill(p.pid, "SIGCONT");
      } catch {}
      stopped.delete(p.pid);
    }
    note(`SIGCONT engine ${m} after ${ms} ms`);
  }, ms);
}

async function faultInPhase(m: ModelName): Promise<void> {
  const phase = pick(["starting", "waking", "draining"] as const);
  const signal = pick(["SIGKILL", "SIGSTOP"] as const);
  const until = Date.now() + 5000;
  while (Date.now() < until) {
    const view = await models();
    if (view?.find((v) => v.id === m)?.tier === phase) {
      await new Promise((r) => setTimeout(r, between(0, 150)));
      const procs = engineProcs().get(m) ?? [];
      if (procs.length === 0) return;
      note(`${signal} engine ${m} while ${phase}`);
      if (signal === "SIGSTOP") freeze(m, procs, pick([1000, 3000, 6000, 10000]));
      else
        for (const p of procs) {
          try {
            process.kill(p.pid, signal);
          } catch {}
        }
      return;
    }
    await new Promise((r) => setTimeout(r, 25));
  }
}

// --- the checks ----------------------------------------------------------------------------------

async function checkSlot(): Promise<void> {
  if (Date.now() - lastReload < 3000) return; // a reload moves members in and out of the slot
  const members = [...variant.inSlot].filter((m) => variant.present.has(m));
  if (members.length < 2) return;
  const view = await models();
  if (view) {
    const residents = view.filter((v) => members.includes(v.id as ModelName) && resident.has(v.tier));
    if (residents.length > 1) {
      violation(`slot has two residents: ${residents.map((r) => `${r.id} ${r.tier}`).join(", ")}`);
    }
  }
  const procs = engineProcs();
  const awake: string[] = [];
  for (const m of members) {
    for (const p of (procs.get(m) ?? []).filter((p) => p.state !== "Z")) {
      // A frozen engine keeps its GPU memory in the state it froze in: its last answer counts.
      const asleep = p.state === "T" ? lastSleeping.get(p.pid) : await isSleeping(m);
      if (p.state !== "T" && asleep !== undefined) lastSleeping.set(p.pid, asleep);
      if (asleep === false) awake.push(`${m} (pid ${p.pid}${p.state === "T" ? ", frozen" : ""})`);
    }
  }
  if (awake.length > 1) {
    twoAwake++;
    // Twice in a row: a sleep call's answer and the next wake may be close together.
    if (twoAwake >= 2) violation(`two engines of the slot awake: ${awake.join(", ")}`);
  } else twoAwake = 0;
  for (const m of modelNames) {
    const live = (procs.get(m) ?? []).filter((p) => p.state !== "Z");
    if (live.length > 1) {
      twoEngines.set(m, (twoEngines.get(m) ?? 0) + 1);
      if (twoEngines.get(m) === 8)
        violation(`${m} has two engines for 3 s: ${live.map((p) => `${p.pid} ${p.state}`).join(", ")}`);
    } else twoEngines.delete(m);
  }
}
const lastSleeping = new Map<number, boolean>();
let twoAwake = 0;
const twoEngines = new Map<ModelName, number>();

const zombies = new Map<number, number>();
function checkZombies(servePid: number): void {
  const all = processes();
  const guards = new Set(all.filter((p) => p.cmd.includes("engine-guard")).map((p) => p.pid));
  for (const p of all) {
    if (p.state !== "Z" || !(p.ppid === servePid || guards.has(p.ppid))) continue;
    // A process just killed is a zombie until its parent reaps it: one that stays is the fault.
    const seen = (zombies.get(p.pid) ?? 0) + 1;
    zombies.set(p.pid, seen);
    if (seen === 6) {
      const parent = all.find((q) => q.pid === p.ppid);
      violation(
        `zombie ${p.pid} (${p.comm}) for 2 s, child of ${p.ppid} (${parent?.state} ${parent?.cmd.slice(0, 120)})`,
      );
    }
  }
}

/** What is wrong between a model's reported tier and its engine (process, `/is_sleeping`). */
async function mismatches(m: ModelName, view: ModelView[]): Promise<string[]> {
  const live = (engineProcs().get(m) ?? []).filter((p) => p.state !== "Z");
  const v = view.find((x) => x.id === m);
  const problems: string[] = [];
  if (!v) {
    if (live.length > 0)
      problems.push(`engine of ${m} runs (pid ${live[0]!.pid}) but ${m} is not configured`);
    return problems;
  }
  const asleep = await isSleeping(m);
  if (v.tier === "cold" && live.length > 0)
    problems.push(`${m} is cold but its engine runs (pid ${live[0]!.pid})`);
  if (v.tier !== "cold" && live.length === 0) problems.push(`${m} is ${v.tier} but no engine runs`);
  if (v.tier.startsWith("asleep") && asleep !== true)
    problems.push(`${m} is ${v.tier} but is_sleeping=${asleep}`);
  if (v.tier === "ready" && asleep !== false && m !== "d")
    problems.push(`${m} is ready but is_sleeping=${asleep}`);
  if (live.length > 1) problems.push(`${m} has ${live.length} engines: ${live.map((p) => p.pid).join(", ")}`);
  note(`quiet: ${m} ${v.tier}, engines ${live.map((p) => p.pid).join(",") || "none"}, is_sleeping ${asleep}`);
  return problems;
}

async function checkQuiet(servePid: number): Promise<void> {
  // Quiet: no client, no fault; wait until nothing is held or in flight and the tiers settled.
  let view: ModelView[] | undefined;
  for (let i = 0; i < 40; i++) {
    view = await models();
    if (
      view?.every(
        (v) => v.held === 0 && v.inFlight === 0 && !["starting", "waking", "draining"].includes(v.tier),
      )
    )
      break;
    await new Promise((r) => setTimeout(r, 500));
  }
  await new Promise((r) => setTimeout(r, 1000));
  view = await models();
  if (!view) return violation("the admin API does not answer after the quiet period");
  for (const m of modelNames) {
    // The ladder's own timers go on in the quiet (sleepAfter, deepSleepAfter, whose level 1 -> 2 move
    // wakes the engine briefly while it shows asleep-1): a mismatch must outlast a second look.
    let problems = await mismatches(m, view);
    if (problems.length > 0) {
      await new Promise((r) => setTimeout(r, 3000));
      view = (await models()) ?? view;
      problems = await mismatches(m, view);
    }
    for (const problem of problems) violation(problem);
  }
  checkZombies(servePid);
}

// --- the soak's measurements ------------------------------------------------------------------------

const snapshotDir = join(dir, "snapshots");
const snapshotCount = Math.max(2, Number(values.snapshots));
const sampleEveryMs = parseDuration(values.interval!) ?? 10_000;
interface Sample {
  s: number;
  requests: number;
  rssKiB: number;
  threads: number;
  openFiles: number;
  descendants: number;
  zombies: number;
  series: number;
  staleModelSeries: number;
  removedChecked: number;
  timelineEntries: number;
}
const samples: Sample[] = [];
const heaps: { s: number; requests: number; summary: HeapSummary; file: string }[] = [];

/** One sample of the serve process, its metrics and its timeline, also appended to samples.jsonl. */
async function sample(pid: number): Promise<void> {
  const get = async (path: string) => {
    try {
      const res = await fetch(`${url}${path}`, { signal: AbortSignal.timeout(5000) });
      return await res.text();
    } catch {
      return undefined;
    }
  };
  const proc = sampleProcess(pid);
  const metrics = sampleMetrics((await get("/metrics")) ?? "", variant.present as Set<string>);
  const timeline = await get("/snooze/v1/timeline");
  const timelineEntries = timeline ? (JSON.parse(timeline) as { entries: unknown[] }).entries.length : -1;
  // A removed model's engine drains and stops after the reload: its series may stay that long.
  const stale = metrics.staleModelSeries.filter((line) => {
    const gone = removedAt.get(/model="([^"]*)"/.exec(line)?.[1] as ModelName);
    return gone !== undefined && Date.now() - gone > 20_000;
  });
  if (stale.length > 0) note(`series of removed models: ${stale.length}, e.g. ${stale[0]}`);
  // How many models this sample could catch a leftover series of (removed 20 s ago or more).
  const removedChecked = [...removedAt.values()].filter((at) => Date.now() - at > 20_000).length;
  const row: Sample = {
    s: (Date.now() - started) / 1000,
    requests: done,
    ...proc,
    series: metrics.series,
    staleModelSeries: stale.length,
    removedChecked,
    timelineEntries,
  };
  samples.push(row);
  appendFileSync(
    join(dir, "samples.jsonl"),
    `${JSON.stringify({ ...row, byFamily: metrics.byFamily, labelValues: metrics.labelValues })}\n`,
  );
  note(
    `sample: ${done} requests, rss ${(proc.rssKiB / 1024).toFixed(1)} MiB, ${proc.openFiles} files, ` +
      `${proc.threads} threads, ${proc.descendants} processes below, ${metrics.series} series, ` +
      `${timelineEntries} timeline entries`,
  );
}

/**
 * Pauses clients and faults, waits until nothing is held or in flight, and has the serve process
 * write a heap snapshot (a full GC first), summed by constructor.
 */
async function heapSnapshot(pid: number): Promise<void> {
  let resume = () => {};
  paused = new Promise<void>((r) => {
    resume = r;
  });
  try {
    for (let i = 0; i < 60 && open > 0; i++) await new Promise((r) => setTimeout(r, 250));
    for (let i = 0; i < 40; i++) {
      const view = await models();
      if (view?.every((v) => v.held === 0 && v.inFlight === 0)) break;
      await new Promise((r) => setTimeout(r, 250));
    }
    const before = new Set(heapSnapshots(snapshotDir));
    process.kill(pid, "SIGUSR2");
    let file: string | undefined;
    // Written whole before the process answers again: a file, then an answer to a request.
    for (let i = 0; i < 240 && !file; i++) {
      await new Promise((r) => setTimeout(r, 500));
      file = heapSnapshots(snapshotDir).find((f) => !before.has(f));
    }
    if (!file) return note("heap snapshot: none written in 2 minutes");
    await models();
    for (let size = -1; size !== statSync(file).size; ) {
      size = statSync(file).size;
      await new Promise((r) => setTimeout(r, 1000));
    }
    const summary = summarizeHeapSnapshot(file);
    heaps.push({ s: (Date.now() - started) / 1000, requests: done, summary, file });
    note(
      `heap snapshot ${heaps.length}: ${done} requests, ${(summary.bytes / 1048576).toFixed(1)} MiB used after GC, ${summary.nodes} objects`,
    );
    // Only the first and the latest are kept on disk, to be compared by hand.
    if (heaps.length > 2) rmSync(heaps.at(-2)!.file, { force: true });
  } finally {
    paused = undefined;
    resume();
  }
}

/** Slopes after the warm-up (the first snapshot), per 1,000 requests; heap growth by constructor. */
function soakReport(): void {
  const from = heaps[0]?.requests ?? 0;
  const warm = samples.filter((x) => x.requests >= from);
  const fields = [
    "rssKiB",
    "openFiles",
    "threads",
    "descendants",
    "series",
    "staleModelSeries",
    "removedChecked",
    "timelineEntries",
  ] as const;
  const total = heaps.at(-1)?.requests ?? done;
  console.log(`soak: ${total} requests; churn ${JSON.stringify(Object.fromEntries(churn))}`);
  console.log(`slopes per 1,000 requests after the warm-up (${warm.length} samples from request ${from}):`);
  for (const f of fields) {
    const per = slope(warm.map((x) => [x.requests, x[f]] as const)) * 1000;
    const first = warm[0]?.[f];
    const last = warm.at(-1)?.[f];
    console.log(`  ${f}: ${per.toFixed(2)} (${first} -> ${last})`);
  }
  // Writing a heap snapshot raises the resident memory for good (the writer's own buffers): the
  // resident memory's slope is taken between snapshots, where nothing but the churn moves it.
  for (let i = 1; i < heaps.length; i++) {
    const between = samples.filter((x) => x.s > heaps[i - 1]!.s && x.s < heaps[i]!.s);
    const per = slope(between.map((x) => [x.requests, x.rssKiB] as const)) * 1000;
    console.log(
      `  rssKiB between snapshots ${i} and ${i + 1}: ${per.toFixed(0)} per 1,000 requests (${between.length} samples, ` +
        `${between[0]?.rssKiB} -> ${between.at(-1)?.rssKiB})`,
    );
  }
  if (heaps.length >= 2) {
    const heapPoints = heaps.map((h) => [h.requests, h.summary.bytes] as const);
    console.log(
      `  heap used after GC: ${((slope(heapPoints) * 1000) / 1024).toFixed(1)} KiB per 1,000 requests ` +
        `(${heaps.map((h) => `${(h.summary.bytes / 1048576).toFixed(1)} MiB at ${h.requests}`).join(", ")})`,
    );
    const first = heaps[0]!;
    const last = heaps.at(-1)!;
    console.log(
      `heap growth by kind, snapshot 1 -> ${heaps.length} (${last.requests - first.requests} requests):`,
    );
    for (const row of heapGrowth(first.summary, last.summary, last.requests - first.requests)) {
      console.log(
        `  ${row.kind}: +${row.count} (${(row.bytes / 1024).toFixed(1)} KiB), ${row.perThousand.toFixed(2)} per 1,000 requests`,
      );
    }
  }
}

// --- the run -------------------------------------------------------------------------------------

async function main(): Promise<void> {
  writeFileSync(configFile, yamlOf(variant));
  mkdirSync(snapshotDir, { recursive: true });
  const serve = spawn(
    process.execPath,
    [
      // A soak's heap snapshots: written on SIGUSR2 into the process's directory.
      ...(soak ? ["--heapsnapshot-signal=SIGUSR2"] : []),
      join(import.meta.dirname, "..", "bin", "snooze.js"),
      "serve",
      "--config",
      configFile,
      "--host",
      "127.0.0.1",
      "--port",
      String(port),
      "--state-dir",
      stateDir,
      "--stop-grace",
      `${stopGraceS}s`,
      "--shutdown-grace",
      `${shutdownGraceS}s`,
    ],
    {
      stdio: ["ignore", "ignore", "pipe"],
      env: { ...process.env, SNOOZE_LOG_LEVEL: "info" },
      cwd: snapshotDir,
    },
  );
  // To a file as it comes: a soak's log would not fit in memory.
  const log = createWriteStream(join(dir, "serve.log"));
  serve.stderr!.pipe(log);
  const exited = new Promise<number | null>((r) => serve.once("exit", (code) => r(code)));
  for (let i = 0; i < 100 && !(await models()); i++) await new Promise((r) => setTimeout(r, 100));
  await new Promise((r) => setTimeout(r, 300));
  const fdBaseline = openFiles(serve.pid!);
  const baselineLinks = new Set(
    readdirSync(`/proc/${serve.pid}/fd`).map((fd) => readlinkSync(`/proc/${serve.pid}/fd/${fd}`)),
  );
  note(`seed ${seed}, ${durationMs} ms, snooze serve pid ${serve.pid}, ${fdBaseline} open files, dir ${dir}`);

  const clients = Array.from({ length: 6 }, (_, n) => clientLoop(n));
  if (soak) clients.push(watcherLoop(), watcherLoop());
  const end = Date.now() + durationMs;
  const checker = setInterval(() => {
    if (paused) return;
    void checkSlot();
    checkZombies(serve.pid!);
  }, 400);
  const snapshotsAt = soak
    ? Array.from({ length: snapshotCount }, (_, i) => started + ((i + 1) / snapshotCount) * durationMs)
    : [];
  let nextSample = Date.now();
  while (Date.now() < end) {
    await new Promise((r) => setTimeout(r, soak ? between(500, 3000) : between(150, 1500)));
    if (soak && Date.now() >= nextSample) {
      nextSample = Date.now() + sampleEveryMs;
      await sample(serve.pid!);
    }
    if (snapshotsAt.length > 1 && Date.now() >= snapshotsAt[0]!) {
      snapshotsAt.shift();
      await heapSnapshot(serve.pid!);
    }
    await fault(serve);
  }
  if (soak) {
    await sample(serve.pid!);
    await heapSnapshot(serve.pid!);
  }
  running = false;
  await Promise.all(clients);
  for (let i = 0; i < 60 && open > 0; i++) await new Promise((r) => setTimeout(r, 500));
  for (const pid of stopped) process.kill(pid, "SIGCONT");
  clearInterval(checker);
  note(`clients done: ${JSON.stringify(Object.fromEntries([...outcomes].sort()))}`);
  for (const [key, message] of examples) note(`example ${key}: ${message.slice(0, 300)}`);
  await checkQuiet(serve.pid!);
  // The baseline had no engine: stop them all (their pipes are open files), then let kept-alive
  // connections (clients to Snooze, Snooze to engines) close, after about 5 s idle.
  for (const m of modelNames) {
    if (variant.present.has(m))
      await fetch(`${url}/snooze/v1/models/${m}/stop`, { method: "POST" }).catch(() => {});
  }
  await new Promise((r) => setTimeout(r, 6000));
  const fdEnd = openFiles(serve.pid!);
  note(`open files: ${fdBaseline} at start, ${fdEnd} at the end`);
  if (fdEnd > fdBaseline + 10) {
    const links = readdirSync(`/proc/${serve.pid}/fd`)
      .map((fd) => {
        try {
          return readlinkSync(`/proc/${serve.pid}/fd/${fd}`);
        } catch {
          return "?";
        }
      })
      .filter((link) => !baselineLinks.has(link))
      .map(describeSocket);
    violation(`open files of snooze serve: ${fdBaseline} -> ${fdEnd}: ${links.join(" ")}`);
  }
  // SIGTERM under load: clients again, a request in every model, an engine frozen.
  running = true;
  const lastClients = Array.from({ length: 6 }, (_, n) => clientLoop(10 + n));
  await new Promise((r) => setTimeout(r, 2500));
  const frozen = pick(modelNames);
  if (signalEngine(frozen, "SIGSTOP")) note(`SIGSTOP engine ${frozen} before the SIGTERM`);
  await new Promise((r) => setTimeout(r, between(100, 1500)));
  const termAt = Date.now();
  serve.kill("SIGTERM");
  note("SIGTERM under load");
  const bound = (shutdownGraceS + stopGraceS + 3) * 1000;
  const code = await Promise.race([exited, new Promise<"late">((r) => setTimeout(() => r("late"), bound))]);
  if (code === "late") {
    violation(`SIGTERM: snooze serve still runs after ${bound} ms`);
    serve.kill("SIGKILL");
    await exited;
  } else note(`SIGTERM: exit ${code} after ${Date.now() - termAt} ms`);
  running = false;
  await Promise.all(lastClients);
  await new Promise((r) => setTimeout(r, 300));
  for (const [m, procs] of engineProcs()) {
    violation(`after exit: engine of ${m} left (${procs.map((p) => `${p.pid} ${p.state}`).join(", ")})`);
    for (const p of procs) process.kill(p.pid, "SIGKILL");
  }
  if (soak) soakReport();
  console.log(
    violations.length === 0
      ? `seed ${seed}: every invariant held`
      : `seed ${seed}: ${violations.length} violations\n${violations.join("\n")}`,
  );
  process.exit(violations.length === 0 ? 0 : 1);
}

await main();
