import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, readFileSync } from "node:fs";

/**
 * A child process of the harness (etcd, kube-apiserver, ...). Each one leads its own process group,
 * so stopping it also stops whatever it started (the stand-in kubelet's sims), and its output goes
 * straight to a log file that a failing test can show.
 */
export interface ManagedProcess {
  name: string;
  pid: number;
  logPath: string;
  /** Resolves when the process has exited, with how. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Whether it is still running. */
  running(): boolean;
  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves once it has exited. */
  stop(graceMs?: number): Promise<void>;
  /** The last `lines` lines of its log, for error messages. */
  tail(lines?: number): string;
}

export interface StartOptions {
  logPath: string;
  env?: NodeJS.ProcessEnv;
  cwd?: string;
}

// Every process still running when the test worker exits is killed, also when a test failed or
// the worker is torn down before the afterAll hooks ran.
const live = new Set<ChildProcess>();
process.on("exit", () => {
  for (const child of live) killGroup(child, "SIGKILL");
});

function killGroup(child: ChildProcess, signal: NodeJS.Signals) {
  if (child.pid === undefined || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    // Already gone.
  }
}

export function startProcess(
  name: string,
  command: string,
  args: string[],
  options: StartOptions,
): ManagedProcess {
  const log = openSync(options.logPath, "a");
  let child: ChildProcess;
  try {
    child = spawn(command, args, {
      stdio: ["ignore", log, log],
      env: options.env ?? process.env,
      cwd: options.cwd,
      detached: true,
    });
  } finally {
    closeSync(log);
  }
  live.add(child);
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    child.once("exit", (code, signal) => {
      live.delete(child);
      // The group may still hold grandchildren: they go with their parent.
      if (child.pid !== undefined) {
        try {
          process.kill(-child.pid, "SIGKILL");
        } catch {
          // No one left in the group.
        }
      }
      resolve({ code, signal });
    });
    child.once("error", () => {
      live.delete(child);
      resolve({ code: null, signal: null });
    });
  });
  const tail = (lines = 40) => {
    try {
      return readFileSync(options.logPath, "utf8").trimEnd().split("\n").slice(-lines).join("\n");
    } catch {
      return "";
    }
  };
  return {
    name,
    pid: child.pid ?? -1,
    logPath: options.logPath,
    exited,
    running: () => child.exitCode === null && child.signalCode === null,
    tail,
    async stop(graceMs = 10_000) {
      if (child.exitCode !== null || child.signalCode !== null) return;
      killGroup(child, "SIGTERM");
      const timer = setTimeout(() => killGroup(child, "SIGKILL"), graceMs);
      await exited;
      clearTimeout(timer);
    },
  };
}
