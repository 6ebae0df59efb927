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
