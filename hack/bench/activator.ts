/** Runs `activator-process.ts` as a child with IPC and asks it questions. */
import { type ChildProcess, fork } from "node:child_process";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import type {
  ActivatorReply,
  ActivatorRequest,
  GcPauses,
  LoopDelay,
  MemoryReading,
  RouteView,
  Timeline,
} from "./activator-protocol.ts";

export interface ActivatorProcess {
  url: string;
  pid: number;
  memory(): Promise<MemoryReading>;
  route(model: string): Promise<RouteView>;
  timeline(model: string): Promise<Timeline>;
  /** Starts measuring its event loop's delay; the promise it returns stops and reads it. */
  loopDelay(): Promise<() => Promise<LoopDelay>>;
  /** Its garbage collector's pauses so far; undefined from an activator process that does not tell. */
  gcPauses(): Promise<GcPauses | undefined>;
  close(): Promise<void>;
}

export interface ActivatorProcessOptions {
  /** Write a V8 CPU profile of the activator into this directory when it exits. */
  cpuProfileDir?: string;
  /**
   * Another checkout's `hack/bench/activator-process.ts` (same IPC protocol), to measure its build
   * beside this one's in one run; default: this checkout's.
   */
  script?: string;
}

const script = fileURLToPath(new URL("./activator-process.ts", import.meta.url));

/** Starts the activator (with autoscaler) on `configFile` in its own Node process. */
export async function startActivator(
  configFile: string,
  options: ActivatorProcessOptions = {},
): Promise<ActivatorProcess> {
  const execArgv = ["--expose-gc", "--max-old-space-size=2048"];
  if (options.cpuProfileDir) execArgv.push("--cpu-prof", `--cpu-prof-dir=${options.cpuProfileDir}`);
  const child: ChildProcess = fork(options.script ?? script, [configFile], {
    execArgv,
    stdio: ["ignore", "inherit", "inherit", "ipc"],
    env: { ...process.env, SNOOZE_LOG_LEVEL: "error" },
  });
  const exited = once(child, "exit");
  const pending = new Map<number, { resolve(reply: ActivatorReply): void; reject(error: Error): void }>();
  let sequence = 0;
  const started = new Promise<{ url: string; pid: number }>((resolve, reject) => {
    child.on(
      "message",
      (message: { ready?: string; pid?: number; id?: number; reply?: ActivatorReply; error?: string }) => {
        if (message.ready) resolve({ url: message.ready, pid: message.pid! });
        const waiter = message.id !== undefined ? pending.get(message.id) : undefined;
        if (!waiter) return;
        pending.delete(message.id!);
        if (message.error) waiter.reject(new Error(message.error));
        else waiter.resolve(message.reply!);
      },
    );
    child.once("exit", (code) => {
      reject(new Error(`the activator process exited with code ${code} before it was ready`));
      for (const waiter of pending.values()) waiter.reject(new Error("the activator process exited"));
    });
  });
  const { url, pid } = await started;
  const ask = (request: ActivatorRequest, timeoutMs = 30_000): Promise<ActivatorReply> =>
    new Promise((resolve, reject) => {
      const id = ++sequence;
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the activator did not answer ${request.cmd} within ${timeoutMs}ms`));
      }, timeoutMs);
      pending.set(id, {
        resolve: (reply) => {
          clearTimeout(timer);
          resolve(reply);
        },
        reject: (error) => {
          clearTimeout(timer);
          reject(error);
        },
      });
      child.send({ id, request });
    });
  return {
    url,
    pid,
    memory: async () => (await ask({ cmd: "memory" })).memory!,
    route: async (model) => (await ask({ cmd: "route", model })).route!,
    timeline: async (model) => (await ask({ cmd: "timeline", model })).timeline!,
    // Undefined from a baseline checkout whose activator process does not answer it yet.
    gcPauses: async () => (await ask({ cmd: "gc" }).catch(() => undefined))?.gc,
    async loopDelay() {
      await ask({ cmd: "loop-delay", phase: "start" });
      return async () => (await ask({ cmd: "loop-delay", phase: "stop" })).loopDelay!;
    },
    async close() {
      if (child.exitCode !== null) return;
      await ask({ cmd: "close" }).catch(() => {});
      const timer = setTimeout(() => child.kill("SIGKILL"), 10_000);
      await exited;
      clearTimeout(timer);
    },
  };
}
