import { type FSWatcher, realpathSync, watch } from "node:fs";
import { basename, dirname } from "node:path";
import { type Clock, systemClock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";
import { ConfigError, readConfigBytes } from "../lib/settings/index.ts";

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
 * A link at the path (`snooze.yaml -> ~/dotfiles/snooze.yaml`) is followed: the directory of the
 * file it leads to is watched too, so an edit made there is seen (found by an outside tester: only
 * the link's own directory was watched, and such edits reloaded nothing until a SIGHUP); a link
 * pointed elsewhere is followed anew.
 *
 * A directory deleted or moved away ends the watch on it: the directory at the path is then watched
 * again once it is there (looked for every `retryMs`), and its file read. A file that stays gone is
 * logged once; the settings in use stay; when it comes back it is a change, whatever it holds. A
 * file that is there but cannot be used (not readable, a directory in its place, larger than a
 * settings file may be: `readConfigBytes`) is a change too, once per problem, so the reload says
 * what is wrong with it and counts it as invalid.
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
  /** What was last seen at the path: the file's bytes, or what is wrong with it. */
  let last: Buffer | string | undefined;
  let timer: { cancel(): void } | undefined;
  let watcher: FSWatcher | undefined;
  let missing = false;
  let closed = false;
  /** The file a link at the path leads to, and the watch on its directory. */
  let target: { path: string; watcher: FSWatcher } | undefined;
  const follow = () => {
    let real: string | undefined;
    let own: string | undefined;
    try {
      real = realpathSync(file);
      own = `${realpathSync(directory)}/${name}`;
    } catch {}
    if (real === target?.path) return;
    target?.watcher.close();
    target = undefined;
    // No link (or none that leads anywhere yet): the watch on the path's directory sees it all.
    if (real === undefined || real === own) return;
    const leadsTo = basename(real);
    try {
      const watcher = watch(dirname(real), { persistent: false }, (_event, filename) => {
        if (filename === null || String(filename) === leadsTo) soon();
      });
      // Its directory went: looked for again when the path is next read.
      watcher.on("error", () => {
        watcher.close();
        if (target?.watcher === watcher) target = undefined;
      });
      target = { path: real, watcher };
    } catch {}
  };
  /** The file's bytes, what is wrong with it (in words), or undefined when it is not there. */
  const read = async (): Promise<Buffer | string | undefined> => {
    try {
      return await readConfigBytes(file);
    } catch (error) {
      if (!(error instanceof ConfigError)) return String(error);
      return (error.cause as NodeJS.ErrnoException | undefined)?.code === "ENOENT"
        ? undefined
        : error.message;
    }
  };
  const same = (a: Buffer | string | undefined, b: Buffer | string | undefined) =>
    typeof a === "string" || typeof b === "string" || a === undefined || b === undefined
      ? a === b
      : a.equals(b);
  void read().then((seen) => {
    last ??= seen;
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
    const seen = await read();
    if (closed) return;
    follow();
    if (seen === undefined) {
      // Gone for a moment mid-rename (the rename's own event brings us back here), or for good.
      if (!missing) log.warn("the settings file is gone; the settings in use stay", { file });
      missing = true;
      return;
    }
    // A file back after it was gone is read into the settings even when it says what it said:
    // a SIGHUP while it was gone was refused, and that refusal stood in `snooze status` over a
    // file that is what runs (found by an outside tester). Such a reload finds nothing changed.
    const back = missing;
    missing = false;
    if (!back && same(seen, last)) return;
    last = seen;
    // A file that cannot be used is reloaded too: the reload says what is wrong with it.
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
  follow();
  return {
    close() {
      closed = true;
      timer?.cancel();
      watcher?.close();
      target?.watcher.close();
    },
  };
}
