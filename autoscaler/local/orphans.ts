import type { ChildProcess } from "node:child_process";

const children = new Set<ChildProcess>();
let installed = false;

/**
 * Engines must not outlive Snooze, even when it crashes: one `exit` handler for the whole process
 * (not one per platform) kills every engine still running.
 */
export function killAllOnExit(child: ChildProcess): void {
  children.add(child);
  child.once("close", () => children.delete(child));
  if (installed) return;
  installed = true;
  process.once("exit", () => {
    for (const c of children) c.kill("SIGKILL");
  });
}
