import { mkdirSync } from "node:fs";
import { dirname, resolve } from "node:path";

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
