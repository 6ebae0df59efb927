import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { setTimeout as delay } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import { freePort } from "../lib/free-port.ts";
import type { Logger } from "../lib/log.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { EngineClient } from "./engine-client.ts";
import type { Platform, ReplicaHandle } from "./platform.ts";

interface Engine {
  handle: ReplicaHandle;
  child: ChildProcess;
  client: EngineClient;
  /** Last lines the engine printed, for the reason a start failed. */
  tail: string[];
  exited: boolean;
  stopping: boolean;
}

const host = "127.0.0.1";
const readinessInterval = 100;
const stopGrace = 10_000;

/** Runs engines as child processes of this one: `vllm serve` for real, `snooze sim` in the demo. */
export class LocalPlatform implements Platform {
  private readonly engines = new Map<string, Engine>();
  private readonly exitListeners: ((replica: ReplicaHandle, reason: string) => void)[] = [];
  private readonly log: Logger;
  private sequence = 0;

  constructor(log: Logger) {
    this.log = log;
    // A crash of Snooze itself must not orphan engines holding a GPU.
    process.once("exit", () => {
      for (const engine of this.engines.values()) engine.child.kill("SIGKILL");
    });
  }

  async start(model: ModelConfig, signal: AbortSignal): Promise<ReplicaHandle> {
    const port = model.port ?? (await freePort(host));
    const substitute = (arg: string) =>
      arg.replaceAll("${PORT}", String(port)).replaceAll("${HOST}", host).replaceAll("${MODEL}", model.id);
    const [file, ...args] = model.command.flatMap((arg) =>
      arg === "${SNOOZE}" ? snoozeArgv() : [substitute(arg)],
    );
    const env = { ...process.env, ...model.env, ...(model.sleep ? { VLLM_SERVER_DEV_MODE: "1" } : {}) };
    const handle: ReplicaHandle = {
      id: `${model.id}-${++this.sequence}`,
      model: model.id,
      address: `${host}:${port}`,
    };
    const child = spawn(file!, args, { env, stdio: ["ignore", "pipe", "pipe"] });
    const engine: Engine = {
      handle,
      child,
      client: new EngineClient(handle.address),
      tail: [],
      exited: false,
      stopping: false,
    };
    this.engines.set(handle.id, engine);
    const log = this.log.child({ model: model.id, replica: handle.id });
    const keep = (chunk: Buffer) => {
      for (const line of chunk.toString("utf8").split("\n")) {
        if (!line.trim()) continue;
        engine.tail.push(line);
        if (engine.tail.length > 20) engine.tail.shift();
        log.debug("engine output", { line });
      }
    };
    child.stdout!.on("data", keep);
    child.stderr!.on("data", keep);
    const spawned = new Promise<void>((resolve, reject) => {
      child.once("spawn", resolve);
      child.once("error", reject);
    });
    // "close", not "exit": by then the last lines of output have been read.
    child.once("close", (code, sig) => {
      engine.exited = true;
      this.engines.delete(handle.id);
      if (engine.stopping) return;
      const reason = `engine exited (${sig ? `signal ${sig}` : `code ${code}`})${lastWords(engine)}`;
      log.warn("engine exited on its own", { reason });
      for (const listener of this.exitListeners) listener(handle, reason);
    });
    log.info("engine starting", { command: [file, ...args].join(" ") });
    try {
      await spawned;
      while (!(await engine.client.healthy(1_000))) {
        if (engine.exited) throw new Error(`the engine exited while loading${lastWords(engine)}`);
        signal.throwIfAborted();
        await delay(readinessInterval, undefined, { signal });
      }
      return handle;
    } catch (error) {
      await this.stop(handle);
      const reason = signal.aborted
        ? ((signal.reason as Error)?.message ?? "start aborted")
        : (error as Error).message;
      throw new Error(reason);
    }
  }

  async stop(replica: ReplicaHandle): Promise<void> {
    const engine = this.engines.get(replica.id);
    if (!engine || engine.exited) return;
    engine.stopping = true;
    const exited = once(engine.child, "close");
    engine.child.kill("SIGTERM");
    const timer = setTimeout(() => engine.child.kill("SIGKILL"), stopGrace);
    await exited;
    clearTimeout(timer);
  }

  async sleep(replica: ReplicaHandle, level: 1 | 2, timeoutMs: number): Promise<void> {
    await this.client(replica).sleep(level, "wait", timeoutMs);
  }

  async wake(replica: ReplicaHandle, fromLevel: 1 | 2, timeoutMs: number): Promise<void> {
    await this.client(replica).wake(fromLevel, timeoutMs);
  }

  alive(replica: ReplicaHandle): boolean {
    const engine = this.engines.get(replica.id);
    return engine !== undefined && !engine.exited;
  }

  /** The engine's process id, for `snooze status` and tests. */
  pid(replica: ReplicaHandle): number | undefined {
    return this.engines.get(replica.id)?.child.pid;
  }

  onExit(listener: (replica: ReplicaHandle, reason: string) => void): void {
    this.exitListeners.push(listener);
  }

  async close(): Promise<void> {
    await Promise.all([...this.engines.values()].map((engine) => this.stop(engine.handle)));
  }

  private client(replica: ReplicaHandle): EngineClient {
    const engine = this.engines.get(replica.id);
    if (!engine) throw new Error(`replica ${replica.id} is not running`);
    return engine.client;
  }
}

/** The engine's last lines of output: usually the reason it failed. */
function lastWords(engine: Engine): string {
  return engine.tail.length ? `: ${engine.tail.slice(-3).join(" | ")}` : "";
}

/** `${SNOOZE}` in a command runs this same Snooze (e.g. `snooze sim`) on this same Node.js. */
function snoozeArgv(): string[] {
  return [process.execPath, fileURLToPath(new URL("../bin/snooze.js", import.meta.url))];
}
