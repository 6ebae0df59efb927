import { readFileSync } from "node:fs";

/**
 * A process as Linux's /proc/<pid>/stat tells of it: the fields Snooze reads, named and numbered as
 * proc(5) numbers them (from 1). Times are in clock ticks (`getconf CLK_TCK`, usually 100 a second).
 */
export interface ProcStat {
  /** (1) The process id. */
  pid: number;
  /** (2) The command name, without the parentheses around it; it may hold spaces and parentheses. */
  comm: string;
  /** (3) One letter: R running, S sleeping, D disk sleep, T stopped, Z zombie, X dead, … */
  state: string;
  /** (4) The parent's pid. */
  ppid: number;
  /** (5) The process group id. */
  pgrp: number;
  /** (14) CPU time in user mode. */
  utime: number;
  /** (15) CPU time in kernel mode. */
  stime: number;
  /** (22) When the process started, after boot: a pid reused by another process has another. */
  starttime: number;
}

/** A field proc(5) writes as a decimal count (`%d`, `%u`, `%lu`, `%llu`); NaN for anything else. */
const count = (field: string | undefined): number =>
  field !== undefined && /^\d+$/.test(field) ? Number(field) : Number.NaN;

/**
 * The text of a /proc/<pid>/stat file (`pid (comm) state ppid pgrp …`), parsed; undefined when it
 * is not one. The command name is the program's own to choose (prctl, or the name of the file run)
 * and may hold spaces and `) (`, so splitting the whole line by spaces, or cutting at the first `)`,
 * would shift every later field; the kernel writes nothing after it that has a `)`, so the fields
 * after the command name begin two characters after the last `)` in the text.
 */
export function parseProcStat(text: string): ProcStat | undefined {
  const open = text.indexOf("(");
  const close = text.lastIndexOf(")");
  if (open < 1 || close < open || text[open - 1] !== " " || text[close + 1] !== " ") return undefined;
  // After `) `, index 0 is field 3 (state): field n is at index n - 3.
  const after = text
    .slice(close + 2)
    .trimEnd()
    .split(" ");
  const stat: ProcStat = {
    pid: count(text.slice(0, open - 1)),
    comm: text.slice(open + 1, close),
    state: after[0] ?? "",
    ppid: count(after[1]),
    pgrp: count(after[2]),
    utime: count(after[11]),
    stime: count(after[12]),
    starttime: count(after[19]),
  };
  if (!/^[A-Za-z]$/.test(stat.state)) return undefined;
  for (const value of [stat.pid, stat.ppid, stat.pgrp, stat.utime, stat.stime, stat.starttime]) {
    if (Number.isNaN(value)) return undefined;
  }
  return stat;
}

/**
 * /proc/<pid>/stat of a process, parsed; undefined when it cannot be read. Every caller means the
 * same by that, a process not there to look at: it is gone (ENOENT, or ESRCH when it exits as it is
 * read), hidden (EACCES: another user's under `hidepid`), or the system has no /proc (not Linux).
 */
export function readProcStat(pid: number): ProcStat | undefined {
  let text: string;
  try {
    text = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return undefined;
  }
  return parseProcStat(text);
}
