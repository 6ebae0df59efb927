import type { ChildProcess } from "node:child_process";
import { join } from "node:path";
import { afterEach } from "vitest";
import { groupMembers, scratchDir, serveProcess, writeConfig } from "../helpers/serve-process.ts";

/** Whether every process of a group is gone. */
export const gone = (pgid: number) => groupMembers(pgid).length === 0;

/**
 * Real `snooze serve` runs of a test file (test/helpers/serve-process.ts), each with a state
 * directory of its own, and whatever of them is left after each test killed: the processes, and
 * the engines' process groups passed to `group` (a test that failed early may have left them).
 */
export function serveRuns() {
  const children: ChildProcess[] = [];
  const groups: number[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) child.kill("SIGKILL");
    for (const pgid of groups.splice(0)) {
      try {
        process.kill(-pgid, "SIGKILL");
      } catch {}
    }
  });
  return {
    /** The engines' process groups recorded so far in this test. */
    groups: groups as readonly number[],
    /** A process to kill after the test. */
    track(child: ChildProcess): void {
      children.push(child);
    },
    /** An engine's process group to kill after the test. */
    group(pgid: number): void {
      groups.push(pgid);
    },
    /** `snooze serve` on `yaml` with its own state directory and a 2 s stop grace, then `args`. */
    start(yaml: string, args: string[] = [], options: Parameters<typeof serveProcess>[2] = {}) {
      const dir = scratchDir();
      const stateDir = join(dir, "state");
      const config = writeConfig(yaml, dir);
      const run = serveProcess(config, ["--state-dir", stateDir, "--stop-grace", "2s", ...args], options);
      children.push(run.child);
      return { ...run, stateDir, config };
    },
  };
}
