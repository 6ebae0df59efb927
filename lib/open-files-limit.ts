import { readFileSync } from "node:fs";

/**
 * This process's soft limit on open file descriptors (`ulimit -n`, RLIMIT_NOFILE), or undefined
 * where it cannot be read (not Linux, or unlimited). Node has no getrlimit; Linux says it in
 * /proc/self/limits.
 */
export function openFilesLimit(
  read: () => string = () => readFileSync("/proc/self/limits", "utf8"),
): number | undefined {
  let text: string;
  try {
    text = read();
  } catch {
    return undefined;
  }
  const soft = /^Max open files\s+(\d+)\s/m.exec(text)?.[1];
  return soft === undefined ? undefined : Number(soft);
}
