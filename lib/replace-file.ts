import { renameSync, rmSync, writeFileSync } from "node:fs";

/**
 * Replaces `path` with `text` whole or not at all: written to `temporary`, then renamed over it, so
 * a reader never sees half a file. A write that fails (a full disk) removes its temporary, which
 * nothing else would once this process is gone, and throws the write's error.
 */
export function replaceFile(path: string, temporary: string, text: string, mode = 0o600): void {
  try {
    writeFileSync(temporary, text, { mode });
    renameSync(temporary, path);
  } catch (error) {
    try {
      rmSync(temporary, { force: true });
    } catch {} // a read-only disk: the error to say is the write's
    throw error;
  }
}
