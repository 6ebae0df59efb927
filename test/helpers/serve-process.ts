import { type ChildProcess, spawn } from "node:child_process";
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { type ProcStat, readProcStat } from "../../lib/proc-stat.ts";

/** A `snooze serve` running as a real process (`node bin/snooze.js serve`). */
export interface ServeProcess {
  child: ChildProcess;
  /** Its URL, once it logged that it listens. */
  url: Promise<string>;
  /** Its exit code (null when a signal ended it). */
  exited: Promise<number | null>;
  stderr(): string;
}

/** A temporary directory of its own for one test (settings file, state directory). */
export function scratchDir(): string {
  return mkdtempSync(join(tmpdir(), "snooze-cli-"));
}

export function writeConfig(text: string, dir = scratchDir()): string {
  const file = join(dir, "snooze.yaml");
  writeFileSync(file, text);
  return file;
}

/**
 * Runs `node bin/snooze.js serve --config <file> --port 0 ...args`; the URL resolves once it logs
 * that it listens. With `command`, that argv runs in its place (a wrapper such as npx).
 */
export function serveProcess(
  config: string,
  args: string[] = [],
  options: { command?: string[]; env?: NodeJS.ProcessEnv; cwd?: string } = {},
): ServeProcess {
  const argv = options.command ?? [process.execPath, "bin/snooze.js"];
  const child = spawn(argv[0]!, [...argv.slice(1), "serve", "--config", config, "--port", "0", ...args], {
    stdio: ["ignore", "pipe", "pipe"],
    env: options.env ?? process.env,
    cwd: options.cwd,
  });
  let stderr = "";
  const exited = new Promise<number | null>((resolve) => child.once("close", resolve));
  const url = new Promise<string>((resolve, reject) => {
    child.stderr!.on("data", (chunk: Buffer) => {
      stderr += chunk;
      const match = /"msg":"listening"[^\n]*?"url":"([^"]+)"/.exec(stderr);
      if (match) resolve(match[1]!);
    });
    void exited.then(() => reject(new Error(`snooze serve exited early:\n${stderr}`)));
  });
  url.catch(() => {}); // tests that expect an early exit never read the URL
  return { child, url, exited, stderr: () => stderr };
}

/** The engines recorded in a state directory's `serve-*.json` files. */
export function recordedEngines(stateDir: string): { model: string; pgid: number; port: number }[] {
  let names: string[];
  try {
    names = readdirSync(stateDir).filter((n) => /^serve-\d+\.json$/.test(n));
  } catch {
    return [];
  }
  return names.flatMap((n) => JSON.parse(readFileSync(join(stateDir, n), "utf8")).engines);
}

/** The live (not zombie) processes of a process group, by /proc. */
export function groupMembers(pgid: number): number[] {
  return processesWhere((stat) => stat.pgrp === pgid);
}

/** The pids of the processes, zombies apart, whose parent is `pid` (Linux: read from /proc). */
export function childrenOf(pid: number): number[] {
  return processesWhere((stat) => stat.ppid === pid);
}

/** The pids of the live processes (zombies apart) whose /proc/<pid>/stat matches. */
function processesWhere(match: (stat: ProcStat) => boolean): number[] {
  const found: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat && stat.state !== "Z" && match(stat)) found.push(Number(name));
  }
  return found;
}

/** Whether a process runs (and is not a zombie). */
export function running(pid: number): boolean {
  const state = readProcStat(pid)?.state;
  return state !== undefined && state !== "Z";
}
