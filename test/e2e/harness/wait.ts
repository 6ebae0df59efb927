import { setTimeout as sleep } from "node:timers/promises";

export interface WaitOptions {
  /** What is awaited, for the error message. */
  what: string;
  timeoutMs: number;
  intervalMs?: number;
  /** Rejects early with this when it settles first (e.g. the process that should answer died). */
  abort?: Promise<unknown>;
  /** Extra text for the timeout message, such as a log tail; read only when the wait fails. */
  detail?: () => string;
}

/**
 * Calls `check` until it returns a value other than undefined, bounded in time. Errors thrown by
 * `check` count as "not yet" and the last one is reported on timeout.
 */
export async function waitFor<T>(check: () => Promise<T | undefined>, options: WaitOptions): Promise<T> {
  const deadline = Date.now() + options.timeoutMs;
  const interval = options.intervalMs ?? 100;
  let lastError: unknown;
  let aborted: string | undefined;
  options.abort?.then(
    (value) => {
      aborted = `stopped early: ${JSON.stringify(value)}`;
    },
    (error: unknown) => {
      aborted = `stopped early: ${String(error)}`;
    },
  );
  while (Date.now() < deadline) {
    if (aborted) break;
    try {
      const value = await check();
      if (value !== undefined) return value;
    } catch (error) {
      lastError = error;
    }
    await sleep(Math.min(interval, Math.max(0, deadline - Date.now())));
  }
  const reason = aborted ?? `timed out after ${options.timeoutMs}ms`;
  const last = lastError
    ? `; last error: ${lastError instanceof Error ? lastError.message : String(lastError)}`
    : "";
  const detail = options.detail ? `\n${options.detail()}` : "";
  throw new Error(`waiting for ${options.what}: ${reason}${last}${detail}`);
}
