import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

/**
 * One memory-reducing garbage collection, for a server that has just started. Start-up (compiling
 * a few hundred modules, building the settings schemas, reading the config) grows V8's young
 * generation to about 11 MiB, of which about 1 MiB is live once the server is idle, and V8 gives
 * that back only in a memory-reducing collection, which an idle process never triggers (issue 14:
 * 15 MiB of an idle `snooze serve`'s 96 MiB RSS). Under load the young generation grows again as
 * it needs to.
 *
 * V8's `gc` function exists only with `--expose-gc`; the flag is set just long enough to fetch it
 * from a fresh context and then cleared (the on-disk compile cache is keyed by V8's flags, so later
 * imports still hit it). The collection is synchronous: 30–80 ms on a loaded 2-core machine, once.
 */
export function releaseStartupMemory(): void {
  setFlagsFromString("--expose-gc");
  let gc: ((options: object) => void) | undefined;
  try {
    gc = runInNewContext("gc") as (options: object) => void;
  } finally {
    setFlagsFromString("--no-expose-gc");
  }
  // "last-resort" is V8's CollectAllAvailableGarbage: a full, memory-reducing collection that also
  // shrinks the young generation (a plain major collection keeps its size).
  gc({ type: "major", execution: "sync", flavor: "last-resort" });
}
