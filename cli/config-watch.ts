import { type FSWatcher, watch } from "node:fs";
import { readFile } from "node:fs/promises";
import { basename, dirname } from "node:path";
import { type Clock, systemClock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";

export interface ConfigWatchOptions {
  log: Logger;
  /** Quiet time after the last event in the directory before the file is read (default 250 ms). */
  debounceMs?: number;
  /** While the directory is gone, how often to look for it again (default 1 s). */
  retryMs?: number;
  clock?: Clock;
}

/**
 * Calls `changed` when the content of `file` changes (`snooze serve --watch-config`). The directory
 * is watched, not the file: editors save by writing a new file and renaming it over the old one
 * (vim, most IDEs), which ends a watch on the file itself, and Kubernetes swaps a ConfigMap's
 * `..data` link. Events come in bursts (truncate, write, rename), so the file is read once things
 * are quiet for `debounceMs`, and `changed` runs only when its text differs from the last seen.
 *
 * A directory deleted or moved away ends the watch on it: the directory at the path is then watched
 * again once it is there (looked for every `retryMs`), and its file read. A file that stays gone is
 * logged once; the settings in use stay.
 */
export function watchConfigFile(
  file: string,
  changed: () => void,
  options: ConfigWatchOptions,
): { close(): void } {
  const clock = options.clock ?? systemClock;
  const debounceMs = options.debounceMs ?? 250;
  const retryMs = options.retryMs ?? 1_000;
  const { log } = options;
  const directory = dirname(file);
  const name = basename(file);
  let last: string | undefined;
  let timer: { cancel(): void } | undefined;
  let watcher: FSWatcher | undefined;
  let missing = false;
  let closed = false;
  const read = () => readFile(file, "utf8").catch(() => undefined);
  void read().then((text) => {
    last ??= text;
  });
  const soon = (ms = debounceMs) => {
    timer?.cancel();
    timer = clock.setTimeout(() => void settle(), ms);
  };
  const settle = async () => {
    timer = undefined;
    if (closed) return;
    if (!watcher) {
      if (!arm()) return soon(retryMs);
      log.info("watching the settings file's directory again", { file });
    }
    const text = await read();
    if (closed) return;
    if (text === undefined) {
      // Gone for a moment mid-rename (the rename's own event brings us back here), or for good.
      if (!missing) log.warn("the settings file is gone; the settings in use stay", { file });
      missing = true;
      return;
    }
    missing = false;
    if (text === last) return;
    last = text;
    changed();
  };
  /** The directory went (deleted, or moved away): this watch sees nothing from now on. */
  const lost = () => {
    watcher?.close();
    watcher = undefined;
    soon();
  };
  const arm = (): boolean => {
    try {
      watcher = watch(directory, { persistent: false }, (_event, filename) => {
        const seen = filename === null ? undefined : String(filename);
        // Linux names the watched directory itself when it is deleted or moved.
        if (seen === basename(directory)) return lost();
        // No name (some platforms), the file, or a Kubernetes ConfigMap's `..data` swap.
        if (seen !== undefined && seen !== name && !seen.startsWith("..")) return;
        soon();
      });
    } catch {
      return false;
    }
    watcher.on("error", lost);
    return true;
  };
  if (!arm()) {
    log.warn("cannot watch the settings file's directory yet; SIGHUP still reloads it", { file });
    soon(retryMs);
  }
  return {
    close() {
      closed = true;
      timer?.cancel();
      watcher?.close();
    },
  };
}
