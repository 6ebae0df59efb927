import { readFileSync, readlinkSync } from "node:fs";

/**
 * Whether the process began with its stdout closed (`snooze status >&-`). Node opens /dev/null,
 * read-write, on a standard descriptor it finds closed at start, so every write "succeeds" and the
 * answer is lost with exit code 0; a shell's `> /dev/null` opens it write-only, a wish to be obeyed.
 * Told apart by the descriptor's flags (Linux's /proc); elsewhere (no /proc) never taken as closed.
 */
export function stdoutWasClosed(fd = 1): boolean {
  try {
    if (readlinkSync(`/proc/self/fd/${fd}`) !== "/dev/null") return false;
    const flags = /^flags:\s*([0-7]+)$/m.exec(readFileSync(`/proc/self/fdinfo/${fd}`, "utf8"))?.[1];
    // O_ACCMODE 3, O_RDWR 2: Node's own reopening.
    return flags !== undefined && (Number.parseInt(flags, 8) & 3) === 2;
  } catch {
    return false;
  }
}
