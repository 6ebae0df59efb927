import { watch } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { type Clock, systemClock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";

export interface ConfigWatchOptions {
  log: Logger;
  /** Quiet time after the last event in the directory before the file is read (default 250 ms). */
  debounceMs?: number;
  clock?: Clock;
}

/**
 * Calls `changed` when the content of `file` changes (`snooze serve --watch-config`). The directory
 * is watched, not the file: editors save by writing a new file and renaming it over the old one
 * (vim, most IDEs), which ends a watch on the file itself, and Kubernetes swaps a ConfigMap's
 * `..data` link. Events come in bursts (truncate, write, rename), so the file is read once things
 * are quiet for `debounceMs`, and `changed` runs only when its text differs from the last seen.
 */
export function watchConfigFile(
  file: string,
  changed: () => void,
  options: ConfigWatchOptions,
): { close(): void } {
  const clock = options.clock ?? systemClock;
  const debounceMs = options.debounceMs ?? 250;
  const name = basename(file);
  let last: string | undefined;
  let timer: { cancel(): void } | undefined;
  let closed = false;
  const read = () => readFile(file, "utf8").catch(() => undefined);
  void read().then((text) => {
    last ??= text;
  });
  const settle = async () => {
    timer = undefined;
    const text = await read();
    // Gone for a moment mid-rename: the rename's own event brings us back here.
    if (closed || text === undefined || text === last) return;
    last = text;
    changed();
  };
  const watcher = watch(dirname(file), { persistent: false }, (_event, filename) => {
    // No name (some platforms), the file, or a Kubernetes ConfigMap's `..data` swap.
    if (filename !== null && filename !== name && !String(filename).startsWith("..")) return;
    timer?.cancel();
    timer = clock.setTimeout(() => void settle(), debounceMs);
  });
  watcher.on("error", (error) =>
    options.log.warn("cannot watch the settings file any more; SIGHUP still reloads it", { file, error }),
  );
  return {
    close() {
      closed = true;
      timer?.cancel();
      watcher.close();
    },
  };
}
