import { type ChildProcess, spawn } from "node:child_process";
import { hostname } from "node:os";
import { fileURLToPath } from "node:url";
import { type Context, context, ROOT_CONTEXT } from "@opentelemetry/api";
import { adminTokenEnv } from "../../lib/admin-token-env.ts";
import { clipMiddle } from "../../lib/clip.ts";
import { engineWords } from "../../lib/engine-words.ts";
import { freePort, portInUse } from "../../lib/free-port.ts";
import type { Logger } from "../../lib/log.ts";
import { sameEngineSettings } from "../../lib/settings/config-diff.ts";
import { type ModelConfig, snoozeArgument, substitutePlaceholders } from "../../lib/settings/index.ts";
import { cudaDevicesEnv } from "../../lib/settings/slot-device.ts";
import { EngineClient, vllmApiKey } from "../engine-client.ts";
import {
  type Departure,
  type Platform,
  type RecordedTier,
  type Replica,
  type ReplicaSetView,
  StartFailed,
  WriteConflict,
} from "../platform.ts";
import {
  EngineRecords,
  engineTokenVariable,
  type Leftover,
  newEngineToken,
  processStartTime,
  stopLeftovers,
} from "./engine-records.ts";
import { EngineSecrets } from "./engine-secrets.ts";
import { failureWords } from "./failure-words.ts";
import { killGroupOnExit, signalGroup, untilGroupGone } from "./orphans.ts";
import { OutputLines } from "./output-lines.ts";

interface Engine {
  replica: Replica;
  /** The engine's guard, which leads the process group of the engine and all it starts. */
  child: ChildProcess;
  pgid?: number;
  client: EngineClient;
  /** While starting: asks /health now rather than at the next poll (the engine printed something). */
  nudge?: () => void;
  /** Its output for `snooze logs` and the status page: the last `outputLines` lines, and how many it printed. */
  output: string[];
  /** The line each output stream has begun and not ended yet, kept as `output`'s lines are. */
  unfinished: () => string[];
  printed: number;
  exited: boolean;
  /** Asked to stop: its exit is no departure. */
  stopping: boolean;
  /** Resolves once the engine is gone and its output read. */
  gone: Promise<void>;
  /** The settings it was started with: it is outdated while the model's differ in an engine setting. */
  settings: ModelConfig;
}

export interface LocalPlatformOptions {
  /**
   * How long a stopped engine has between SIGTERM and SIGKILL (default 10 s, what a real vLLM may
   * need to free its GPU). The guard applies the same grace when Snooze itself is gone.
   */
  stopGraceMs?: number;
  /**
   * Where the record of running engines is kept (`serve-<pid>.json`), so that the next Snooze can
   * stop what a killed one left (`stopLeftovers`); no record when unset.
   */
  stateDir?: string;
}

interface ModelEngines {
  config: ModelConfig;
  /** Counts the engine-setting changes: an engine spawned under an older one is outdated. */
  generation: number;
  scale: number;
  engines: Map<string, Engine>;
  /** The engine that exited last: its output stays readable until another one exits. */
  exited?: Engine;
}

const host = "127.0.0.1";
/**
 * How often a starting engine's /health is asked. A refused connection on loopback costs next to
 * nothing, and the time between the engine listening and the next poll is added to every cold
 * start (half the interval on average), so it is short; every line the engine prints (vLLM's
 * "Application startup complete", the simulator's "listening") asks at once besides.
 */
const readinessIntervalMs = 20;
/** However much the engine prints, checks start at least this far apart. */
const readinessMinGapMs = 5;
const outputLines = 500;
/** Characters kept of one line of engine output: its start and its end. */
const maxLineLength = 2_000;
const defaultStopGraceMs = 10_000;
/** After SIGKILL, how long to wait for the output pipes to close before giving up on them. */
const outputDrainMs = 1_000;
const node = hostname();
const guardScript = fileURLToPath(new URL("./engine-guard.js", import.meta.url));

/**
 * Runs engines as child processes of this one (`vllm serve` for real, `snooze sim` in the demo),
 * as a replica set per model: scaling up spawns engines, scaling down stops the named ones first.
 * An engine that exits on its own is gone, not restarted behind the controller's back: the
 * controller hears of the departure (with the engine's last words) and decides.
 *
 * Each engine runs under a guard (engine-guard.js) in a process group of its own: stopping an
 * engine signals the whole group, so a wrapper command (`sh -c`, `npx`, `uv run`) never leaves
 * the real engine behind, and the guard stops the group if Snooze dies without a word (SIGKILL).
 */
export class LocalPlatform implements Platform {
  private readonly models = new Map<string, ModelEngines>();
  private readonly listeners: ((model: string, departure?: Departure) => void)[] = [];
  /** Free ports picked for engines not listed yet (see `freeEnginePort`). */
  private readonly picked = new Set<number>();
  private readonly log: Logger;
  private sequence = 0;
  /** `close` or `kill` began: no engine starts any more (a start waiting for a port would, after). */
  private closing = false;
  private readonly stopGraceMs: number;
  private readonly stateDir: string | undefined;
  private readonly records: EngineRecords | undefined;

  constructor(models: Iterable<ModelConfig>, log: Logger, options: LocalPlatformOptions = {}) {
    this.log = log;
    this.stopGraceMs = options.stopGraceMs ?? defaultStopGraceMs;
    this.stateDir = options.stateDir;
    this.records = options.stateDir === undefined ? undefined : new EngineRecords(options.stateDir, log);
    for (const config of models) this.setModel(config);
  }

  /**
   * Adds a model, or takes new settings for one (a config reload). With `restart`, the engines
   * running now are marked outdated: the controller drains and stops them, and every engine
   * started from now on runs the new command. An engine started with the settings given now (a
   * reload that undid the one before while the engine drained for it) is outdated no more: the
   * controller takes it back, rather than restarting an engine that runs what is asked.
   */
  setModel(config: ModelConfig, options: { restart?: boolean } = {}): void {
    const entry = this.models.get(config.id);
    if (!entry) {
      this.models.set(config.id, { config, generation: 0, scale: 0, engines: new Map() });
      return;
    }
    entry.config = config;
    if (!options.restart) return;
    entry.generation++;
    if (entry.engines.size === 0) return;
    for (const engine of entry.engines.values()) {
      const outdated = !sameEngineSettings(engine.settings, config);
      engine.replica = { ...engine.replica, outdated };
    }
    this.changed(config.id);
  }

  /** Forgets a model (no longer in the settings); its engines, if any are left, are stopped first. */
  async removeModel(id: string): Promise<void> {
    const entry = this.models.get(id);
    if (!entry) return;
    entry.scale = 0;
    await Promise.all([...entry.engines.values()].map((engine) => this.stop(engine)));
    if (this.models.get(id) === entry) this.models.delete(id);
  }

  replicaSet(model: string): ReplicaSetView | undefined {
    const entry = this.models.get(model);
    if (!entry) return undefined;
    // An engine being stopped is still listed until it exited: it may hold its GPU until then.
    const replicas = [...entry.engines.values()].map((e) => e.replica);
    return { replicas, scale: entry.scale, scalable: true, selector: "" };
  }

  async scale(model: string, expected: number, to: number, remove: readonly Replica[]): Promise<void> {
    const entry = this.models.get(model);
    if (!entry) throw new WriteConflict(`no model ${model}`);
    if (entry.scale !== expected)
      throw new WriteConflict(`${model} has ${entry.scale} replicas, not ${expected}`);
    entry.scale = to;
    const running = [...entry.engines.values()].filter((e) => !e.stopping);
    if (to > running.length) {
      for (let i = running.length; i < to; i++) {
        try {
          await this.spawn(entry);
        } catch (error) {
          // The engines not begun are not asked for any more: counted, they would stay `starting`
          // for ever, and the requests held for them would wait out their hold budget.
          entry.scale = Math.max(0, entry.scale - (to - i));
          throw error;
        }
      }
      return;
    }
    const named = new Set(remove.map((r) => r.id));
    const victims = [
      ...running.filter((e) => named.has(e.replica.id)),
      ...running.filter((e) => !named.has(e.replica.id)).reverse(),
    ].slice(0, running.length - to);
    await Promise.all(victims.map((engine) => this.stop(engine)));
  }

  async recordTier(_model: string, _replica: Replica, _recorded: RecordedTier): Promise<void> {
    // In one process the controller's own record is the only one there is.
  }

  /** Its stop grace, then SIGKILL, and the time its output has to close after. */
  get stopWithinMs(): number {
    return this.stopGraceMs + outputDrainMs;
  }

  engine(replica: Replica): EngineClient {
    const engine = this.find(replica.id);
    return engine?.client ?? new EngineClient(replica.address ?? `${host}:0`);
  }

  lastOutput(model: string, replica: string): string | undefined {
    const engine = this.models.get(model)?.engines.get(replica);
    if (!engine) return undefined;
    // With the line it is still writing: an engine that hangs often said why without a line end
    // (a prompt, a progress bar's state after its carriage return), which an exit's last words
    // have, its streams ended, and a timeout's had not (found by an outside tester).
    const output = [...engine.output, ...engine.unfinished()];
    return output.length ? engineWords(failureWords(output)) : undefined;
  }

  onChange(listener: (model: string, departure?: Departure) => void): void {
    this.listeners.push(listener);
  }

  /** Each engine's last lines of output (stdout and stderr): the running ones, then the last that exited. */
  logs(model: string): { replica: string; lines: string[]; total: number; running: boolean }[] {
    const entry = this.models.get(model);
    if (!entry) return [];
    const engines = [...entry.engines.values()];
    if (entry.exited && !engines.includes(entry.exited)) engines.push(entry.exited);
    return engines.map((e) => {
      const unfinished = e.exited ? [] : e.unfinished();
      return {
        replica: e.replica.id,
        lines: [...e.output],
        total: e.printed,
        running: !e.exited,
        ...(unfinished.length > 0 && { unfinished }),
      };
    });
  }

  /**
   * The process id of the engine's guard, which is the process group id of the engine and all it
   * started; killing the guard alone (as tests do to crash an engine) takes the group with it.
   */
  pid(replica: string): number | undefined {
    return this.find(replica)?.pgid;
  }

  /**
   * Stops the engines that a Snooze no longer running left behind (by the records in the state
   * directory), and resolves once they are gone: call it before binding any port. `cut` (a stop
   * signal) ends their stop grace: they are killed at once.
   */
  async stopLeftovers(cut?: AbortSignal): Promise<Leftover[]> {
    if (this.stateDir === undefined) return [];
    return stopLeftovers(this.stateDir, this.log, this.stopGraceMs, cut);
  }

  /** Stops every engine: SIGTERM to each group, SIGKILL after the stop grace. */
  async close(): Promise<void> {
    this.closing = true;
    const all = [...this.models.values()].flatMap((m) => [...m.engines.values()]);
    for (const entry of this.models.values()) entry.scale = 0;
    await Promise.all(all.map((engine) => this.stop(engine)));
  }

  /** Kills every engine's process group at once (SIGKILL); resolves once they are gone. */
  async kill(): Promise<void> {
    this.closing = true;
    const all = [...this.models.values()].flatMap((m) => [...m.engines.values()]);
    for (const entry of this.models.values()) entry.scale = 0;
    await Promise.all(all.map((engine) => this.stop(engine, 0)));
  }

  private find(id: string): Engine | undefined {
    for (const entry of this.models.values()) {
      const engine = entry.engines.get(id);
      if (engine) return engine;
    }
    return undefined;
  }

  private changed(model: string, departure?: Departure): void {
    for (const listener of this.listeners) listener(model, departure);
  }

  /**
   * The engine outlives the start that asked for it: its output, exit and readiness watch are no
   * part of that start's trace (they run in the root context); only the line saying it starts is,
   * and the line saying it left before it was up (the start failed with it).
   */
  private spawn(entry: ModelEngines): Promise<void> {
    const start = context.active();
    return context.with(ROOT_CONTEXT, () => this.spawnEngine(entry, start));
  }

  private async spawnEngine(entry: ModelEngines, start: Context): Promise<void> {
    const { config, generation } = entry;
    if (config.port !== undefined) await this.untilOursLeave(config.port, entry);
    // Not another model's fixed port: that model, cold now, would find its port taken by this
    // engine and fail saying another process holds it (the pick is from some 12,000 ports, which
    // fixed ports in the 20000s share; found by an outside tester).
    const fixed = new Set([...this.models.values()].flatMap((other) => other.config.port ?? []));
    const port =
      config.port ??
      (await this.freeEnginePort(fixed).catch((error: Error) => {
        // No engine was begun: the start fails now, saying why, and backs off, as one whose command
        // cannot be run. Thrown on as it was, it was decided again at once, and again (found by an
        // outside tester: out of descriptors, a loop that starved the event loop, held requests
        // never answered and SIGTERM unheard).
        const id = `${config.id}-${++this.sequence}`;
        const reason = `could not pick a port for its engine: ${error.message}`;
        context.with(start, () =>
          this.log.warn("engine not started", { model: config.id, replica: id, reason }),
        );
        throw new StartFailed(id, reason);
      }));
    try {
      await this.beginEngine(entry, config, generation, port, start);
    } finally {
      // Listed by now (its address keeps the port from other picks), or never to be: kept no more,
      // however the start ended: one place lets go of it, not each way out on its own.
      if (config.port === undefined) this.picked.delete(port);
    }
  }

  /**
   * Spawns an engine of `entry` on `port` (picked or fixed) and lists it, unless its start is moot
   * now. It runs `config`, the settings of generation `generation` when the start began.
   */
  private async beginEngine(
    entry: ModelEngines,
    config: ModelConfig,
    generation: number,
    port: number,
    start: Context,
  ): Promise<void> {
    // A fixed port another process already listens on: that process would answer the readiness
    // checks and get the model's traffic while the engine fails to bind. Not counted as up, ever.
    const taken = config.port !== undefined && (await portInUse(port, host));
    const moot = this.startMoot(entry);
    if (moot) {
      this.log.info(`engine not started: ${moot}`, { model: config.id });
      return;
    }
    const values = { PORT: String(port), HOST: host, MODEL: config.id };
    const [file, ...args] = config.command.flatMap((arg) =>
      arg === snoozeArgument ? snoozeArgv() : [substitutePlaceholders(arg, values)],
    );
    const ownEnv = Object.fromEntries(
      Object.entries(config.env).map(([name, value]) => [name, substitutePlaceholders(value, values)]),
    );
    // Python (vLLM logs to stdout) writes a pipe in 8 KiB blocks: its lines reached `snooze logs`
    // minutes late, and those of an engine that died by a signal (a CUDA abort, an OOM kill) never,
    // nor its last words in the failure (found by an outside tester). Unbuffered unless the model's
    // `env` or Snooze's own says otherwise.
    // Snooze's admin token is no engine's business (an engine runs whatever command the file gives,
    // which may print or pass on its environment): not inherited, unless the model's `env` gives it.
    const { [adminTokenEnv]: _adminToken, ...inherited } = process.env;
    const env = {
      PYTHONUNBUFFERED: "1",
      ...inherited,
      ...ownEnv,
      ...(config.sleep ? { VLLM_SERVER_DEV_MODE: "1" } : {}),
      // A slot's member runs on the slot's one GPU, whatever the model's `env` or Snooze's own says.
      ...(config.device !== undefined ? { [cudaDevicesEnv]: config.device } : {}),
    };
    const id = `${config.id}-${++this.sequence}`;
    const replica: Replica = {
      id,
      label: `engine ${id}`,
      uid: id,
      address: `${host}:${port}`,
      up: false,
      createdAt: Date.now(),
      restarts: 0,
      node,
      // The settings changed while a free port was found: this engine runs the old command.
      ...(entry.generation !== generation && !sameEngineSettings(config, entry.config)
        ? { outdated: true }
        : {}),
    };
    const token = newEngineToken();
    // Detached: the guard leads a new session and process group, which the engine joins. Its stdin
    // is a pipe nobody writes: it closes when this process dies, however it dies.
    // `spawn` throws for what the system refuses outright (E2BIG: an argument list too long;
    // ENOMEM), and tells by an "error" event, with no process, when it could not start one (EAGAIN,
    // EMFILE): either way the start fails now, with the reason, as one whose engine exits at once
    // (found by an outside tester: the requests held for it waited out their hold budget, told nothing).
    let child: ChildProcess;
    try {
      child = spawn(process.execPath, [guardScript, String(this.stopGraceMs), file!, ...args], {
        env: { ...env, [engineTokenVariable]: token },
        stdio: ["pipe", "pipe", "pipe"],
        detached: true,
      });
    } catch (error) {
      throw this.notStarted(config.id, id, file!, error as Error, start);
    }
    const pgid = child.pid;
    if (pgid === undefined) {
      const error = await new Promise<Error>((resolve) => child.once("error", resolve));
      throw this.notStarted(config.id, id, file!, error, start);
    }
    const forget = killGroupOnExit(pgid);
    let gone!: () => void;
    const engine: Engine = {
      replica,
      child,
      pgid,
      // With the key of an engine run with vLLM's --api-key, its warm-up is let through.
      client: new EngineClient(replica.address!, vllmApiKey(args, env)),
      output: [],
      unfinished: () => [],
      printed: 0,
      exited: false,
      stopping: false,
      gone: new Promise<void>((resolve) => {
        gone = resolve;
      }),
      settings: config,
    };
    entry.engines.set(id, engine);
    // The record is private (mode 0600) and names the engine as it runs; the log shows no secret.
    const secrets = new EngineSecrets(args, env);
    const command = [file, ...args].join(" ");
    this.records?.add({
      model: config.id,
      replica: id,
      pgid,
      startTime: processStartTime(pgid),
      token,
      port,
      startedAt: new Date(replica.createdAt).toISOString(),
      command,
    });
    const log = this.log.child({ model: config.id, replica: id });
    const keep = (lines: string[]) => {
      for (const whole of lines) {
        if (!whole.trim()) continue;
        // Kept short (found by an outside tester: a 20 MB line became a 170 KB failure reason in
        // every 503 and in `snooze status`, and 500 of them would be 32 MB of logs per engine).
        const line = clipMiddle(secrets.hide(whole), maxLineLength);
        engine.output.push(line);
        engine.printed++;
        if (engine.output.length > outputLines) engine.output.shift();
        log.debug("engine output", { line });
      }
      engine.nudge?.();
    };
    child.stdin!.on("error", () => {}); // never written; only its closing matters
    // Each stream cut into lines of its own (found by an outside tester: a line that straddled two
    // chunks of the pipe was two lines, in `snooze logs`, the log and an exit's last words).
    // The streams in the order they were last written to, so their unfinished lines are too.
    const readers: OutputLines[] = [];
    const streams = [child.stdout!, child.stderr!].map((stream) => {
      const lines = new OutputLines(maxLineLength);
      readers.push(lines);
      stream.on("data", (chunk: Buffer) => {
        keep(lines.push(chunk));
        readers.splice(readers.indexOf(lines), 1);
        readers.push(lines);
      });
      const end = () => keep(lines.end());
      stream.once("end", end);
      return end;
    });
    engine.unfinished = () =>
      readers
        .map((lines) => lines.unfinished())
        .filter((line) => line.trim())
        .map((line) => clipMiddle(secrets.hide(line), maxLineLength));
    let spawnError: Error | undefined;
    child.once("error", (error) => {
      spawnError = error;
    });
    let exit: { code: number | null; sig: NodeJS.Signals | null } | undefined;
    let drain: NodeJS.Timeout | undefined;
    let finishing = false;
    const finish = async () => {
      if (finishing) return;
      finishing = true;
      clearTimeout(drain);
      // A last line without its line end (streams given up on after outputDrainMs end no other way).
      for (const end of streams) end();
      // Listed until every process of its group is gone: its memory (the GPU's too) is free by then.
      await untilGroupGone(pgid);
      engine.exited = true;
      entry.exited = engine;
      forget();
      this.records?.remove(id);
      entry.engines.delete(id);
      gone();
      const { code, sig } = exit ?? { code: null, sig: null };
      if (engine.stopping && !taken) {
        this.changed(config.id);
        return;
      }
      // It left on its own: the replica set is one smaller (nobody asked for a replacement).
      entry.scale = Math.max(0, entry.scale - 1);
      const how = spawnError
        ? `could not run ${file}: ${spawnError.message}`
        : engine.stopping // stopped by us at once: its port was taken
          ? `${portTaken(port)}${lastWords(engine)}`
          : `engine exited (${sig ? `signal ${sig}` : `code ${code}`})${lastWords(engine)}${taken ? `; ${portTaken(port)}` : ""}`;
      // Gone before it was up: its start failed, and the line is that start's (its trace ids).
      const said = () =>
        log.warn(engine.stopping ? "engine stopped: it cannot become ready" : "engine exited on its own", {
          reason: how,
        });
      if (engine.replica.up) said();
      else context.with(start, said);
      this.changed(config.id, { replica: id, reason: how });
    };
    child.once("exit", (code, sig) => {
      exit = { code, sig };
      // The guard left with the engine (or alone, killed): whatever is left of the group goes now.
      // Its members keep the group id from being reused, so this reaches no one else's.
      signalGroup(pgid, "SIGKILL");
      // The last lines of output are read by "close"; a process outside the group holding the
      // pipes must not keep the engine listed for ever.
      drain = setTimeout(() => {
        child.stdout?.destroy();
        child.stderr?.destroy();
        void finish();
      }, outputDrainMs);
    });
    child.once("close", (code, sig) => {
      exit ??= { code, sig };
      void finish();
    });
    context.with(start, () => log.info("engine starting", { command: secrets.command(file!), pgid }));
    // An engine that cannot bind its port may not exit either (a wrapper script that waits):
    // stopped now, the start fails at once with the reason, not at startTimeout.
    if (taken) void this.stop(engine);
    else void this.watchReadiness(engine, config.id);
  }

  /**
   * Why a start that waited (for a port) must not begin its engine any more, if it must not. Found
   * by an outside tester: a start waiting for the fixed port of an engine the shutdown was stopping
   * went on once it was free, after every other engine had stopped. Found by reading the code: one
   * waiting while its model was removed (a reload, once the model's stop timed out) spawned an
   * engine into the forgotten model, listed nowhere and stopped by nothing but Snooze's exit,
   * holding the fixed port that the model, added again, would find taken.
   */
  private startMoot(entry: ModelEngines): string | undefined {
    if (this.closing) return "Snooze is shutting down";
    if (this.models.get(entry.config.id) !== entry) return "the model was removed";
    return undefined;
  }

  /**
   * A free port for an engine: none of `fixed`, and none that an engine of Snooze's still running
   * was given. vLLM loads for minutes before it binds its port, which looks free all that while: a
   * second engine given it has whichever binds first answer the other model's readiness checks and
   * get its traffic, the other failing to bind (found by an outside tester). Picked again when an
   * engine started during the pick (while the port was tried) was given the same one.
   */
  private async freeEnginePort(fixed: ReadonlySet<number>): Promise<number> {
    let port = await freePort(host, new Set([...fixed, ...this.enginePorts()]));
    for (let again = 0; again < 10 && this.enginePorts().has(port); again++)
      port = await freePort(host, new Set([...fixed, ...this.enginePorts()]));
    // Kept from other picks until its engine is listed (or its start given up): `spawnEngine` lets go.
    this.picked.add(port);
    return port;
  }

  /** The ports of this platform's engines that have not exited, listening or not yet, and those picked for one. */
  private enginePorts(): Set<number> {
    const engines = [...this.models.values()].flatMap((m) => [...m.engines.values()]);
    const ports = engines.filter((e) => !e.exited).map((e) => Number(e.replica.address?.split(":").pop()));
    return new Set([...ports, ...this.picked]);
  }

  /** The engine `id` could not be begun at all: why, in its start's trace and as the start's failure. */
  private notStarted(model: string, id: string, file: string, error: Error, start: Context): StartFailed {
    const code = (error as NodeJS.ErrnoException).code;
    const reason = `could not run ${file}: ${error.message}${code === "E2BIG" ? " (its command and environment are longer than the system takes)" : ""}`;
    context.with(start, () => this.log.warn("engine not started", { model, replica: id, reason }));
    return new StartFailed(id, reason);
  }

  /**
   * Polls `/health` until the engine answers: then the replica is up. A line of engine output
   * cuts the wait before the next poll short (one check at a time, `readinessMinGapMs` apart).
   */
  private async watchReadiness(engine: Engine, model: string): Promise<void> {
    let nudged = false;
    let wake: (() => void) | undefined;
    engine.nudge = () => {
      nudged = true;
      wake?.();
    };
    try {
      while (!engine.exited && !engine.stopping) {
        nudged = false;
        const started = performance.now();
        // Not asked (Snooze out of file descriptors): not up yet, asked again.
        if (await engine.client.healthy(1_000).catch(() => false)) {
          if (engine.exited || engine.stopping) return;
          engine.replica = { ...engine.replica, up: true, answeredAt: Date.now() };
          this.changed(model);
          return;
        }
        await new Promise<void>((resolve) => {
          // A line printed after the gap asks at once: even a 0 ms timer waits a millisecond, and
          // every cold start waits with it.
          const after = (ms: number) => (ms > 0 ? setTimeout(resolve, ms) : void resolve());
          const soonest = () => Math.max(0, started + readinessMinGapMs - performance.now());
          let timer = after(nudged ? soonest() : readinessIntervalMs);
          wake = () => {
            clearTimeout(timer);
            timer = after(soonest());
          };
        });
        wake = undefined;
      }
    } finally {
      engine.nudge = undefined;
    }
  }

  /**
   * Waits until no engine on its way out holds `port`: one of another model whose settings name
   * the same fixed port (a model renamed or removed by a reload: settings in use never give two
   * models one port; its engine serves its last requests, then stops), or any engine outdated by
   * new settings or being stopped, of this model or another (two models that swapped their fixed
   * ports in one reload: found by a probe, b's start failed on a's engine draining on its old
   * port). A fixed port passes from that engine to the new one; started beside it, the new one
   * could not bind it and the request waiting for it would fail. Not waited for: an engine of this
   * model that stays (a second replica cannot share a fixed port), and one of another model that
   * was given the port as a free one and stays (it may never leave).
   */
  private async untilOursLeave(port: number, entry: ModelEngines): Promise<void> {
    const address = `${host}:${port}`;
    const leaving = [...this.models.values()].flatMap((other) =>
      [...other.engines.values()].filter(
        (e) =>
          !e.exited &&
          e.replica.address === address &&
          (e.stopping || e.replica.outdated === true || (other !== entry && other.config.port === port)),
      ),
    );
    if (leaving.length === 0) return;
    this.log.info("waiting for the engine that holds the model's port to stop", {
      model: entry.config.id,
      port,
      engines: leaving.map((e) => e.replica.id),
    });
    await Promise.all(leaving.map((e) => e.gone));
  }

  /** SIGTERM to the engine's process group, SIGKILL after `graceMs` (at once for 0). */
  private async stop(engine: Engine, graceMs = this.stopGraceMs): Promise<void> {
    if (engine.exited) return;
    if (graceMs <= 0) {
      engine.stopping = true;
      signalGroup(engine.pgid, "SIGKILL");
    } else if (!engine.stopping) {
      engine.stopping = true;
      signalGroup(engine.pgid, "SIGTERM");
    }
    const timer = graceMs > 0 ? setTimeout(() => signalGroup(engine.pgid, "SIGKILL"), graceMs) : undefined;
    await engine.gone;
    clearTimeout(timer);
  }
}

const portTaken = (port: number) =>
  `port ${port} (the model's fixed \`port\`) was in use by another process when the engine started; stop that process or give the model another port`;

/** The engine's last lines of output (and an exception stated before them): usually why it failed. */
function lastWords(engine: Engine): string {
  return engine.output.length ? `: ${engineWords(failureWords(engine.output))}` : "";
}

/** `${SNOOZE}` in a command runs this same Snooze (e.g. `snooze sim`) on this same Node.js. */
function snoozeArgv(): string[] {
  return [process.execPath, fileURLToPath(new URL("../../bin/snooze.js", import.meta.url))];
}
