// The engine guard: the local platform starts every engine through this small script so that no
// engine outlives Snooze, however Snooze ends (SIGKILL and crashes included, when no code of
// Snooze's runs any more).
//
//   node engine-guard.js <grace ms> <command> [args...]
//
// Snooze starts it detached: the guard leads a new session and process group, and the engine (and
// whatever a wrapper such as `sh -c`, `npx` or `uv run` starts under it) joins that group, so one
// signal to the group reaches all of them. The guard's stdin is a pipe from Snooze that Snooze never
// writes: when it reaches end-of-file, or the guard's parent changes, Snooze is gone, and the guard
// sends SIGTERM to the group, then SIGKILL after the grace. A SIGTERM to the group (Snooze stopping
// the engine) arms the same SIGKILL; a command that dies of a SIGTERM sent to it alone has the
// signal passed on to the rest of its group, a stop as well. When the engine exits, the guard exits the same way (the same
// code, or the same signal), so Snooze reads the engine's own end; during a stop, only once the rest
// of the group is gone too (or killed at the end of the grace).
//
// It runs on plain `node` and imports only Node's built-ins: one guard per engine must stay cheap.
// Plain JavaScript for the same reason (like bin/snooze.js): stripping TypeScript loads Node's
// TypeScript parser, which more than doubled a guard's private memory (22 MB against 9 MB).
import { spawn } from "node:child_process";
import {
  accessSync,
  closeSync,
  constants as fsConstants,
  openSync,
  readdirSync,
  readFileSync,
  readSync,
} from "node:fs";
import { constants } from "node:os";
import { delimiter, isAbsolute, join } from "node:path";

const [graceArg, file, ...args] = process.argv.slice(2);
const graceMs = Number(graceArg);
if (!file || !Number.isFinite(graceMs) || graceMs < 0) {
  console.error("usage: node engine-guard.js <grace ms> <command> [args...]");
  process.exit(2);
}

const group = process.pid;
const parent = process.ppid;
/** @type {NodeJS.Timeout | undefined} */
let killTimer;
let snoozeGone = false;
/** SIGTERM reached the guard: its group is being stopped (by Snooze, by someone aiming at the group). */
let groupStopping = false;

/** @param {NodeJS.Signals} signal */
function signalGroup(signal) {
  try {
    process.kill(-group, signal);
  } catch {
    // The group is gone already.
  }
}

/**
 * Whether a process of the group other than the guard still runs (a zombie does not count), read
 * as orphans.ts's groupRunning reads it with lib/proc-stat.ts (not imported: the guard loads no
 * product code, and no TypeScript). Linux reads /proc; elsewhere the answer is no, and Snooze kills
 * what is left once the guard is gone.
 */
function othersRun() {
  let entries;
  try {
    entries = readdirSync("/proc");
  } catch {
    return false;
  }
  for (const name of entries) {
    if (!/^\d+$/.test(name) || Number(name) === process.pid) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      // pid (comm) state ppid pgrp ...: the fields after the command name, which may hold spaces.
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      if (Number(fields[2]) === group && fields[0] !== "Z" && fields[0] !== "X") return true;
    } catch {
      // Gone meanwhile.
    }
  }
  return false;
}

/**
 * Resolves once nothing of the group but the guard runs; the kill timer, when armed, ends the wait.
 * A look reads every process's /proc entry (about 1.5 ms for 160 processes): every 50 ms it costs a
 * busy machine little, and a stop ends at most that much later.
 */
async function untilOthersGone() {
  while (othersRun()) await new Promise((resolve) => setTimeout(resolve, 50));
}

/** SIGTERM reached the group: whatever is left of it gets SIGKILL after the grace. */
function armKill() {
  killTimer ??= setTimeout(() => signalGroup("SIGKILL"), graceMs);
}

/** Snooze died: nobody else will stop the engine. */
function orphaned() {
  if (snoozeGone) return;
  snoozeGone = true;
  console.error("snooze engine guard: snooze is gone; stopping the engine");
  signalGroup("SIGTERM");
  armKill();
}

process.on("SIGTERM", () => {
  groupStopping = true;
  armKill();
});
// The guard has no terminal (its own session); these could only come from someone aiming at it,
// and leaving would orphan the engine. Snooze decides when the engine stops. SIGUSR1 and SIGUSR2
// are the engine's (a Python engine's traceback dump, a log reopen) when sent to its group: left to
// Node, SIGUSR2 would end the guard, and SIGUSR1 would open Node's inspector in it, a debugger on
// 127.0.0.1:9229 that any local process could drive (found by a probe). A listener keeps both out.
for (const signal of ["SIGINT", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"]) process.on(signal, () => {});

process.stdin.on("end", orphaned);
process.stdin.on("close", orphaned);
process.stdin.on("error", orphaned);
process.stdin.resume();
setInterval(() => {
  if (process.ppid !== parent) orphaned();
}, 1_000).unref();

/** What to do about the usual reasons a command cannot run ("spawn ./engine.sh EACCES" alone did not say). */
const spawnHints = {
  ENOENT: "no such file, nor a command of that name on PATH",
  EACCES: "it is not executable (chmod +x), or it is a directory",
};

/**
 * Why a command that is there could not be run all the same (the system says ENOENT, "no such
 * file", of what runs it): the interpreter its first line names is missing (`#!/old/venv/bin/python`:
 * a virtualenv moved or made again), or is named with a Windows line end (`#!/bin/sh` saved with
 * CRLF: `/bin/sh\r`), or a program's loader is (one built for another system). Found by an outside
 * tester: such an engine was told "no such file, nor a command of that name on PATH", of a file
 * that was there. Undefined when the command is not there, or cannot be read.
 * @param {string} command
 * @returns {string | undefined}
 */
function presentButNotRun(command) {
  const path = command.includes("/")
    ? command
    : (process.env.PATH ?? "")
        .split(delimiter)
        .map((dir) => join(dir || ".", command))
        .find((candidate) => {
          try {
            accessSync(candidate, fsConstants.X_OK);
            return true;
          } catch {
            return false;
          }
        });
  if (path === undefined) return undefined;
  let head;
  try {
    const fd = openSync(path, "r");
    try {
      const bytes = Buffer.alloc(512);
      head = bytes.subarray(0, readSync(fd, bytes, 0, bytes.length, 0)).toString("latin1");
    } finally {
      closeSync(fd);
    }
  } catch {
    return undefined;
  }
  const there = path === command ? "the file is there" : `${path} is there`;
  if (!head.startsWith("#!"))
    return `${there}, but what runs it is not: a program built for another system, whose loader is missing?`;
  const line = head.slice(2).split("\n")[0];
  const interpreter = line.trim().split(/[ \t]/)[0];
  if (line.endsWith("\r"))
    return `${there}, but its first line, #!${line.slice(0, -1).trim()}, ends in a carriage return (Windows line ends, CRLF), so the system looks for an interpreter whose name ends in one: save it with LF line ends`;
  return `${there}, but the interpreter its first line names, ${interpreter}, is not: a virtualenv moved or made again? Fix its #! line`;
}

/** Linux's close-on-exec bit of a descriptor's flags (`flags:` in /proc/self/fdinfo, octal). */
const closeOnExec = 0o2000000;

/**
 * Closes the descriptors the guard inherited besides its stdio, before it spawns the engine, which
 * would inherit them in turn (neither Node nor libuv closes them in a child): what Snooze's own
 * parent passed it without close-on-exec (`bash -c 'exec 40>file; snooze serve …'`, a harness's
 * pipe). Node marks descriptors 0-15 close-on-exec at its start (libuv's
 * uv_disable_stdio_inheritance) and stops at the first closed one past 15, so one above a gap got
 * through (found by an outside tester: the file held open by every engine and its guard). An
 * engine gets its stdio and what Snooze gives it deliberately (its environment), nothing else.
 * Everything Node and libuv open is close-on-exec: a descriptor above 2 without the flag is one
 * inherited, and none of the guard's own. Linux reads /proc; elsewhere nothing is closed.
 */
function closeInherited() {
  let names;
  try {
    names = readdirSync("/proc/self/fd");
  } catch {
    return;
  }
  for (const name of names) {
    const fd = Number(name);
    if (!Number.isInteger(fd) || fd <= 2) continue;
    try {
      const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1];
      if (flags !== undefined && (Number.parseInt(flags, 8) & closeOnExec) === 0) closeSync(fd);
    } catch {
      // Closed meanwhile (the listing's own descriptor).
    }
  }
}

closeInherited();
const engine = spawn(file, args, { stdio: ["ignore", "inherit", "inherit"] });
let done = false;
engine.once("error", (error) => {
  if (done) return;
  done = true;
  const code = /** @type {NodeJS.ErrnoException} */ (error).code ?? "";
  // A relative path (`./engine.sh`) starts from the directory Snooze runs in, not the settings
  // file's: "no such file" alone left a user with the script beside snooze.yaml puzzled (found by an
  // outside tester, with `snooze serve -c conf/snooze.yaml`).
  // A whole command line as the program (`command: ["vllm serve m --port ${PORT}"]`): ENOENT, with
  // the relative path's hint when the model's name held a "/" (found by a probe).
  const notRun = code === "ENOENT" ? presentButNotRun(file) : undefined;
  const hint = notRun
    ? notRun
    : code === "ENOENT" && /\s/.test(file.trim())
      ? `the program's name holds spaces: \`command\` is a list, one word an item, as in [${file.trim().split(/\s+/).slice(0, 3).join(", ")}, ...], not one text`
      : code === "ENOENT" && file.includes("/") && !isAbsolute(file)
        ? `no such file in ${process.cwd()}, the directory snooze serve runs in, where a relative path starts; write the path from there, or an absolute one`
        : code === "ENOENT" && isAbsolute(file)
          ? "no such file"
          : spawnHints[code];
  console.error(`could not run ${file}: ${error.message}${hint ? ` (${hint})` : ""}`);
  process.exit(127);
});
engine.once("exit", async (code, signal) => {
  if (done) return;
  done = true;
  // Stopping (SIGTERM reached the group, from Snooze or because Snooze is gone): the command may have
  // been a wrapper that died of the signal at once (`sh -c "vllm serve …; true"`, `bash -c "source
  // …; vllm serve …"`), and the real engine under it is shutting down. It keeps the rest of its
  // grace: the guard stays until the group is empty, and the kill timer ends whatever is left then.
  // Before, the guard left with the wrapper and the group was killed at once (found by a probe:
  // an engine given a 5 s grace was killed 7 ms after its SIGTERM). An engine that exits on its
  // own leaves at once: Snooze kills what it left. A wrapper that died of SIGTERM is a stop too, also
  // when its exit is heard before the guard's own SIGTERM (one loop turn reports both, in either
  // order: the guard left at once, and the engine under it lost its grace; its test failed once in a
  // CI run, and once in 13 runs under load).
  if (signal === "SIGTERM") {
    // The guard's own SIGTERM of a group stop may come a turn after the wrapper's exit; by a timer's
    // turn it has come. None then: the SIGTERM was the command's alone (`kill <pid>` of the `sh -c`
    // or of the `vllm serve`). It is passed on to the rest of the group, which gets the stop grace
    // as in a stop. Before, the real engine under a wrapper got no signal, served on for the grace
    // and was killed, and its end was told as the SIGKILL's.
    if (!groupStopping) await new Promise((resolve) => setTimeout(resolve, 100));
    if (!groupStopping) signalGroup("SIGTERM");
    armKill();
  }
  if (killTimer !== undefined) await untilOthersGone();
  // Snooze is gone: nobody else will stop what is left (without /proc the wait above ends at once).
  if (snoozeGone) signalGroup("SIGKILL");
  clearTimeout(killTimer);
  if (signal) {
    // With no listener left the signal's action is the system's default again (SIGUSR1's too, not
    // Node's inspector: the listener above replaced that for good), so the guard ends by it.
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
    // A signal Node ignores (SIGPIPE): the shell's convention instead.
    process.exit(128 + (constants.signals[signal] ?? 0));
  }
  process.exit(code ?? 1);
});
