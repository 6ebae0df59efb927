import { once } from "node:events";

/**
 * What stdout may hold queued before a command that keeps printing (`logs -f`, `status --watch`)
 * waits for its reader: far above what a reader that keeps up leaves there (a pipe takes 64 KiB
 * before Node queues), small beside what a process should hold for a reader that stopped.
 */
const maxQueuedChars = 1024 * 1024;

/**
 * Resolves once stdout's reader has taken what waits for it, at once when little waits. Found by an
 * outside tester: `snooze logs -f` into a reader that stopped reading (`| less` left unscrolled)
 * asked on every second and queued each answer in the process, about 1.6 MB a second without end.
 * Resolves too when `signal` aborts (Ctrl-C).
 */
export async function outputTaken(
  signal: AbortSignal,
  stream: NodeJS.WriteStream = process.stdout,
): Promise<void> {
  if (stream.writableLength < maxQueuedChars || stream.destroyed) return;
  await once(stream, "drain", { signal }).catch(() => {});
}
