import { readdirSync } from "node:fs";
import { setTimeout as delay } from "node:timers/promises";
import { readProcStat } from "../../lib/proc-stat.ts";

const groups = new Set<number>();
let installed = false;

/** Sends `signal` to the process group `pgid`; never to group 0 or 1 (ours, or every process). */
export function signalGroup(pgid: number | undefined, signal: NodeJS.Signals): void {
  if (pgid === undefined || !Number.isInteger(pgid) || pgid <= 1) return;
  try {
    process.kill(-pgid, signal);
  } catch {
    // The group is gone already.
  }
}

/**
 * Engines must not outlive Snooze. Each runs under a guard that stops it when Snooze dies however it
 * dies (see engine-guard.js); when Snooze exits through its own code with engines still running (a
 * crash, a forced stop), one `exit` handler for the whole process (not one per platform) also kills
 * their process groups at once, so a Snooze started right after finds their ports free.
 */
export function killGroupOnExit(pgid: number): () => void {
  groups.add(pgid);
  if (!installed) {
    installed = true;
    process.once("exit", () => {
      for (const group of groups) signalGroup(group, "SIGKILL");
    });
  }
  return () => groups.delete(pgid);
}

/**
 * Whether a process of group `pgid` still runs. A process that exited and waits to be reaped (a
 * zombie) does not count: it holds no memory, GPU memory included. Linux reads /proc; elsewhere
 * the group counts as running while a signal can reach it.
 */
export function groupRunning(pgid: number): boolean {
  let entries: string[];
  try {
    entries = readdirSync("/proc");
  } catch {
    try {
      process.kill(-pgid, 0);
      return true;
    } catch {
      return false;
    }
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name)) continue;
    const stat = readProcStat(Number(name));
    if (stat && stat.pgrp === pgid && stat.state !== "Z" && stat.state !== "X") return true;
  }
  return false;
}

/**
 * Waits (bounded) until no process of the group runs: an engine's exit is only news once its
 * memory is free, or the next engine on the same GPU would start into an out-of-memory error.
 */
export async function untilGroupGone(pgid: number | undefined, timeoutMs = 2_000): Promise<void> {
  if (pgid === undefined || pgid <= 1) return;
  const deadline = Date.now() + timeoutMs;
  while (groupRunning(pgid) && Date.now() < deadline) await delay(10);
}
