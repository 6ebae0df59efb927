import { lstatSync, readdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import { homedir } from "node:os";
import { isAbsolute, join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { Logger } from "../../lib/log.ts";
import { makeDirectory } from "../../lib/make-directory.ts";
import { type ProcStat, readProcStat } from "../../lib/proc-stat.ts";
import { replaceFile } from "../../lib/replace-file.ts";
import { readSmallFileSync } from "../../lib/small-file.ts";
import { signalGroup } from "./orphans.ts";

/**
 * The record of the engines one `snooze serve` runs, kept in a file of the state directory so that
 * the next `snooze serve` can stop what a killed predecessor left (the guards do that on their own
 * within the stop grace; this covers a guard that died too, and a restart inside that grace). Every
 * check that a process is ours reads /proc, so this works on Linux; elsewhere the guards alone
 * stand between a dead Snooze and its engines.
 */

/** The environment variable that marks an engine (and its children) as one a Snooze started. */
export const engineTokenVariable = "SNOOZE_ENGINE_TOKEN";

/** A record's file name, `serve-<pid>.json`: the pid of the `snooze serve` that keeps it. */
const recordName = /^serve-(\d+)\.json$/;

/** The largest record of engines read: one engine is some 200 bytes of it. */
const maxRecordBytes = 4 * 1024 * 1024;

/** One engine as the record holds it. */
export interface EngineRecord {
  model: string;
  replica: string;
  /** The guard's pid, which is the process group id of the guard, the engine and its children. */
  pgid: number;
  /** The guard's start time in clock ticks after boot (/proc/<pid>/stat field 22): a reused pid differs. */
  startTime?: string;
  /** The value of SNOOZE_ENGINE_TOKEN in the environment of the guard, the engine and its children. */
  token: string;
  port: number;
  /** ISO time it was started. */
  startedAt: string;
  command: string;
}

interface StateFile {
  version: 1;
  snooze: { pid: number; startTime?: string; bootId?: string; startedAt: string };
  engines: EngineRecord[];
}

/** `SNOOZE_STATE_DIR`, else `$XDG_STATE_HOME/snooze`, else `~/.local/state/snooze`. */
export function defaultStateDir(env: NodeJS.ProcessEnv = process.env): string {
  if (env.SNOOZE_STATE_DIR) return env.SNOOZE_STATE_DIR;
  // The XDG Base Directory spec: a relative path there is invalid and ignored. Taken, the state
  // went under whatever directory `snooze serve` was started from (found by an outside tester).
  if (env.XDG_STATE_HOME && isAbsolute(env.XDG_STATE_HOME)) return join(env.XDG_STATE_HOME, "snooze");
  return join(homedir(), ".local", "state", "snooze");
}

export function newEngineToken(): string {
  // node:crypto (49 modules, about 1.5 MiB of RSS; issue 14) loads with the first engine started,
  // not with `snooze serve`: it costs that start some milliseconds, once.
  return process.getBuiltinModule("node:crypto").randomBytes(12).toString("hex");
}

const hasProc = process.platform === "linux";

/** The start time of a process as the record holds it: the text of the count /proc/<pid>/stat gives. */
const startTime = (stat: ProcStat): string => String(stat.starttime);

/** A process's start time in clock ticks after boot, when the system says. */
export function processStartTime(pid: number): string | undefined {
  const stat = hasProc ? readProcStat(pid) : undefined;
  return stat && startTime(stat);
}

function bootId(): string | undefined {
  try {
    return readFileSync("/proc/sys/kernel/random/boot_id", "utf8").trim();
  } catch {
    return undefined;
  }
}

/** Every live (not zombie) process whose process group is one of `groups`. */
function members(groups: ReadonlySet<number>): ProcStat[] {
  const found: ProcStat[] = [];
  for (const name of readdirSync("/proc")) {
    const pid = Number(name);
    if (!Number.isInteger(pid)) continue;
    const stat = readProcStat(pid);
    if (stat && groups.has(stat.pgrp) && stat.state !== "Z" && stat.state !== "X") found.push(stat);
  }
  return found;
}

function carriesToken(pid: number, token: string): boolean {
  try {
    return readFileSync(`/proc/${pid}/environ`, "latin1")
      .split("\0")
      .includes(`${engineTokenVariable}=${token}`);
  } catch {
    return false;
  }
}

/**
 * Whether the process group `engine.pgid` is the one that Snooze started: its leader is the guard
 * with the recorded start time, or a member carries the engine's token. A group id is unique among
 * live groups, so once one member is ours, the whole group is.
 */
function isOurs(engine: EngineRecord): boolean {
  return members(new Set([engine.pgid])).some(
    (p) => (p.pid === engine.pgid && startTime(p) === engine.startTime) || carriesToken(p.pid, engine.token),
  );
}

/** The running engines of this `snooze serve`, written to `<dir>/serve-<pid>.json` on every change. */
export class EngineRecords {
  private readonly dir: string;
  private readonly log: Logger;
  private readonly file: string;
  private readonly engines = new Map<string, EngineRecord>();
  private readonly snooze: StateFile["snooze"];

  constructor(dir: string, log: Logger) {
    this.dir = dir;
    this.log = log;
    this.file = join(dir, `serve-${process.pid}.json`);
    this.snooze = {
      pid: process.pid,
      startTime: processStartTime(process.pid),
      bootId: bootId(),
      startedAt: new Date().toISOString(),
    };
  }

  add(engine: EngineRecord): void {
    this.engines.set(engine.replica, engine);
    this.write();
  }

  remove(replica: string): void {
    if (this.engines.delete(replica)) this.write();
  }

  private write(): void {
    try {
      if (this.engines.size === 0) {
        rmSync(this.file, { force: true });
        return;
      }
      // Private: engine command lines may carry secrets (an --api-key).
      makeDirectory(this.dir, 0o700);
      const state: StateFile = { version: 1, snooze: this.snooze, engines: [...this.engines.values()] };
      replaceFile(this.file, `${this.file}.tmp`, `${JSON.stringify(state, null, 2)}\n`);
    } catch (error) {
      this.log.warn("cannot write the record of running engines", { file: this.file, error });
    }
  }
}

/** What `stopLeftovers` found and stopped. */
export interface Leftover {
  model: string;
  replica: string;
  pgid: number;
  port: number;
  /** The pid of the `snooze serve` that started it. */
  snooze: number;
}

/**
 * Stops the engines that a `snooze serve` which is no longer running left behind, by the records in
 * `dir`: SIGTERM to each engine's process group, SIGKILL after `graceMs`; resolves once they are
 * gone, so their ports are free. A record of a Snooze that still runs is left alone (it stops its own
 * engines); a process group is signalled only when it is verifiably the one recorded (its leader's
 * start time, or the engine's token in a member's environment), so a reused pid is never killed.
 */
export async function stopLeftovers(
  dir: string,
  log: Logger,
  graceMs: number,
  cut?: AbortSignal,
): Promise<Leftover[]> {
  if (!hasProc) return [];
  let names: string[];
  try {
    names = readdirSync(dir).filter((name) => recordName.test(name));
  } catch {
    return []; // no state directory yet: nothing was left
  }
  const boot = bootId();
  const found: Leftover[] = [];
  const done: string[] = [];
  for (const name of names) {
    const file = join(dir, name);
    let state: StateFile;
    try {
      // Bounded and never blocking: a named pipe named like a record hung `snooze serve` at start
      // for good, silent and deaf to SIGTERM (found by an outside tester).
      state = JSON.parse(readSmallFileSync(file, maxRecordBytes).toString("utf8")) as StateFile;
      if (state.version !== 1 || !Array.isArray(state.engines)) throw new Error("not a record of engines");
    } catch (error) {
      const movedTo = setAside(file, name);
      log.warn("ignoring an unreadable record of engines", { file, error, ...(movedTo ? { movedTo } : {}) });
      continue;
    }
    const owner = readProcStat(state.snooze.pid);
    const sameBoot = state.snooze.bootId === undefined || state.snooze.bootId === boot;
    if (sameBoot && owner && owner.state !== "Z" && startTime(owner) === state.snooze.startTime) continue;
    done.push(file);
    // After a reboot every recorded pid belongs to someone else, if anyone.
    if (!sameBoot) continue;
    for (const engine of state.engines) {
      if (!isOurs(engine)) continue;
      found.push({
        model: engine.model,
        replica: engine.replica,
        pgid: engine.pgid,
        port: engine.port,
        snooze: state.snooze.pid,
      });
    }
  }
  if (found.length > 0) {
    log.warn("stopping engines a previous snooze serve left running", {
      engines: found.map((e) => ({ model: e.model, pgid: e.pgid, port: e.port, snooze: e.snooze })),
    });
    const groups = new Set(found.map((e) => e.pgid));
    for (const pgid of groups) signalGroup(pgid, "SIGTERM");
    if (!(await gone(groups, graceMs, cut))) {
      if (cut?.aborted) log.warn("a stop signal came: killing the leftover engines now");
      else log.warn("leftover engines ignored SIGTERM; killing them", { graceMs });
      for (const pgid of groups) signalGroup(pgid, "SIGKILL");
      if (!(await gone(groups, 2_000))) log.error("leftover engines are still running after SIGKILL");
    }
  }
  for (const file of done) {
    try {
      rmSync(file, { force: true });
    } catch (error) {
      // A state directory that cannot be written (a read-only home) still serves: the record stays,
      // and the next start finds its engines gone and tries again.
      log.warn("cannot delete the record of a snooze serve that is gone", { file, error });
    }
  }
  return found;
}

/**
 * Renames an unreadable record (`<name>.unreadable`) so the next start does not warn of it again
 * (found by an outside tester: a truncated record was warned of at every start). Only a regular
 * file whose `snooze serve` (the pid in its name) is gone; the file is kept for a person to read
 * which engines it may name. Undefined when it stays.
 */
function setAside(file: string, name: string): string | undefined {
  const pid = Number(recordName.exec(name)?.[1]);
  const owner = readProcStat(pid);
  if (owner && owner.state !== "Z") return undefined;
  try {
    if (!lstatSync(file).isFile()) return undefined;
    renameSync(file, `${file}.unreadable`);
    return `${file}.unreadable`;
  } catch {
    return undefined;
  }
}

/** Waits until no process is left in `groups`; false after `timeoutMs`, or once `cut` aborts. */
async function gone(groups: ReadonlySet<number>, timeoutMs: number, cut?: AbortSignal): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (members(groups).length === 0) return true;
    if (Date.now() >= deadline || cut?.aborted) return false;
    await delay(50);
  }
}
