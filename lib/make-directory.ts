import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

/**
 * `mkdir -p`: creates `path` and the directories above it that are missing. Not Node's
 * `mkdirSync(path, { recursive: true })`, which never returns for a path under `/proc` (the parent
 * exists but refuses a child with ENOENT, and it retries for ever, blocking the event loop): here
 * every directory is tried once, and the first that cannot be made throws its error.
 */
export function makeDirectory(path: string, mode?: number): void {
  const missing: string[] = [];
  for (let at = resolve(path); ; at = dirname(at)) {
    try {
      mkdirSync(at, { mode });
      break;
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code === "EEXIST") break;
      if (code !== "ENOENT" || dirname(at) === at) throw error;
      missing.push(at);
    }
  }
  for (const dir of missing.reverse()) {
    try {
      mkdirSync(dir, { mode });
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
  }
}

/**
 * Why files cannot be kept in directory `path` (made first, as `makeDirectory` makes it, with
 * `mode`), or undefined when they can: a file is written there and removed, so a read-only mount,
 * a directory of another user and a path under /proc are all found, as the system says them.
 */
export function unwritableDirectory(path: string, mode?: number): string | undefined {
  const probe = join(path, `.snooze-probe-${process.pid}`);
  try {
    makeDirectory(path, mode);
    writeFileSync(probe, "", { mode: 0o600 });
    rmSync(probe, { force: true });
    return undefined;
  } catch (error) {
    return (error as Error).message;
  }
}
