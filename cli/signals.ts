import type { Logger } from "../lib/log.ts";
import { readProcStat } from "../lib/proc-stat.ts";

/** Exits 0 on a stop signal that came before the server command had its own handlers. */
const exitEarly = () => process.exit(0);

/**
 * A server command's modules take a moment to load; a SIGTERM or SIGINT then would kill the process
 * with Node's default (exit 143 or 130), though nothing runs yet that a shutdown would stop. From
 * here until the command installs its own handlers (which calls `releaseEarlyStopSignals`), such a
 * signal is that whole graceful shutdown: exit 0.
 */
export function holdEarlyStopSignals(): void {
  for (const signal of serveStopSignals) process.on(signal, exitEarly);
}

export function releaseEarlyStopSignals(): void {
  for (const signal of serveStopSignals) process.off(signal, exitEarly);
}

let earlyHangUps = 0;
const noteHangUp = () => {
  earlyHangUps++;
};

/**
 * A command that reloads its settings on SIGHUP takes a moment to load, and Node's default for a
 * SIGHUP then ends the process (an outside tester's reloader, fired right after a start, killed
 * `snooze serve` silently). From here until the command takes them (`takeEarlyHangUps`), SIGHUPs
 * are kept: its settings file may have changed since it was read.
 */
export function holdEarlyHangUps(): void {
  process.on("SIGHUP", noteHangUp);
}

/** Whether a SIGHUP came while they were held; from now on the command handles them itself. */
export function takeEarlyHangUps(): boolean {
  process.off("SIGHUP", noteHangUp);
  const any = earlyHangUps > 0;
  earlyHangUps = 0;
  return any;
}

/** Why a shutdown began or was hurried: a signal, or the parent process going away. */
export type StopCause = NodeJS.Signals | "parent-exited";

/** The signals `snooze serve` ends on (SIGHUP reloads the settings instead). */
export const serveStopSignals: readonly NodeJS.Signals[] = ["SIGTERM", "SIGINT", "SIGQUIT"];

export interface StopSignals {
  /** The first stop signal (or the parent's exit): begin the graceful shutdown. */
  readonly first: Promise<StopCause>;
  /** A second stop signal during the shutdown: stop now. */
  readonly second: Promise<StopCause>;
  /**
   * Waits `ms` (a shutdown delay: still serving while load balancers catch up), or less if a second
   * stop signal comes first.
   */
  delay(ms: number): Promise<void>;
  /** Removes the handlers and the parent watch. */
  dispose(): void;
}

export interface StopSignalOptions {
  signals?: readonly NodeJS.Signals[];
  /**
   * Poll `process.ppid` this often and count its change as a stop: the parent died and this process
   * was handed to init. `npm start` and `npx` do not pass SIGTERM on to their child, so without this
   * a stopped npm leaves Snooze running with no parent. 0: no watch.
   */
  parentPollMs?: number;
  /**
   * Watch the grandparent too (its exit hands the parent to init): npm runs a script through
   * `sh -c`, which outlives an npm killed with SIGKILL and stays this process's parent.
   */
  watchGrandparent?: boolean;
}

/**
 * Listens for stop signals from now on: the first starts a graceful shutdown, the second (any of
 * them, again) asks for it to end at once; a third changes nothing more. The handlers stay installed
 * until `dispose()`, so no signal falls back to Node's default (death without cleanup).
 */
export function watchStopSignals(
  log: Logger,
  fields: Record<string, unknown>,
  options: StopSignalOptions = {},
): StopSignals {
  const signals = options.signals ?? ["SIGTERM", "SIGINT"];
  let resolveFirst!: (cause: StopCause) => void;
  let resolveSecond!: (cause: StopCause) => void;
  const first = new Promise<StopCause>((resolve) => {
    resolveFirst = resolve;
  });
  const second = new Promise<StopCause>((resolve) => {
    resolveSecond = resolve;
  });
  let count = 0;
  const stop = (cause: StopCause) => {
    count++;
    if (count === 1) {
      if (cause === "parent-exited") {
        log.warn("the parent process exited; shutting down", fields);
      } else {
        log.info("shutting down", { signal: cause, ...fields });
      }
      resolveFirst(cause);
    } else if (count === 2) {
      log.warn("second stop signal: stopping now", { signal: cause });
      resolveSecond(cause);
    }
  };
  const handler = (signal: NodeJS.Signals) => stop(signal);
  for (const signal of signals) process.on(signal, handler);
  releaseEarlyStopSignals();
  const unwatch = watchParentExit(options, () => {
    if (count === 0) stop("parent-exited");
  });
  return {
    first,
    second,
    async delay(ms) {
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([new Promise((resolve) => (timer = setTimeout(resolve, ms))), second]);
      clearTimeout(timer);
    },
    dispose() {
      for (const signal of signals) process.off(signal, handler);
      unwatch();
    },
  };
}

/**
 * Calls `onExit` once, when the parent exits (this process handed to init) or, with
 * `watchGrandparent`, the parent's parent; polled every `parentPollMs` (0: no watch). Returns what
 * ends the watch. For `snooze serve` and `snooze sim`, which npm starts without passing SIGTERM on.
 */
export function watchParentExit(options: StopSignalOptions, onExit: () => void): () => void {
  const parent = process.ppid;
  const grandparent = options.watchGrandparent ? parentOf(parent) : undefined;
  const pollMs = options.parentPollMs ?? 0;
  const lineageBroken = () =>
    process.ppid !== parent ||
    (grandparent !== undefined && grandparent > 1 && parentOf(parent) !== grandparent);
  // Already an orphan (or a child of init by design, as under systemd or in a container): nothing to watch.
  if (pollMs <= 0 || parent <= 1) return () => {};
  const watch = setInterval(() => {
    if (lineageBroken()) {
      clearInterval(watch);
      onExit();
    }
  }, pollMs);
  watch.unref();
  return () => clearInterval(watch);
}

/** The parent of process `pid` (Linux: /proc/<pid>/stat), or undefined when it cannot be read. */
function parentOf(pid: number): number | undefined {
  return readProcStat(pid)?.ppid;
}

/**
 * Whether `snooze serve` stops when its parent exits. Yes when npm started it (`npm start`, `npx
 * snooze serve`: npm sets `npm_command` and does not pass SIGTERM on, so a stopped npm would leave
 * Snooze to init with its engines), or when it runs in a terminal (a closed terminal ends its shell).
 * Otherwise no: under `nohup`, a service manager or a detached shell job, outliving the parent is what
 * was asked for. (Node resets an inherited SIGHUP ignore, so `nohup` itself cannot be seen.)
 */
export function stopsWithParent(
  env: NodeJS.ProcessEnv = process.env,
  inTerminal = process.stdin.isTTY === true || process.stdout.isTTY === true,
): boolean {
  return env.npm_command !== undefined || inTerminal;
}
