import type { Clock } from "../lib/clock.ts";
import { formatDuration } from "../lib/duration.ts";
import type { Engine } from "./platform.ts";

/**
 * Watches an engine while its sleep call runs. vLLM's API server is async and the sleep runs in the
 * engine core, so `/health` answers throughout the call; an engine that stops answering it is
 * frozen (SIGSTOP, a hung process) or dead, and its sleep call would otherwise hold the model, or its
 * whole slot, until the call's own timeout (a wake's time, 2 minutes by default). Its own module: the
 * controller only wraps its sleep calls in it.
 */

/**
 * How long after the sleep call began, and after each answer, `/health` is asked: the order of the
 * ready engines' re-check (5 s per check), so a frozen engine is found in seconds while a healthy one
 * is asked a handful of trivial questions during a sleep of a minute.
 */
export const sleepWatchIntervalMs = 5_000;
/** How long each `/health` may take: as long as a ready engine's re-check gives it. */
export const sleepWatchCheckMs = 5_000;
/**
 * Checks in a row that must go unanswered before the sleep is given up. Two, not one: an engine
 * moving tens of GB out of the GPU loads its host, and its API server may miss one answer; a wrong
 * verdict costs a cold start (minutes), a second check costs one `sleepWatchCheckMs` more. The
 * second is asked at once after the first miss, whose timeout has already been waited out.
 */
export const sleepWatchMisses = 2;

/** The engine stopped answering its health check during its sleep call. */
export class EngineFrozen extends Error {
  constructor(label: string) {
    super(
      `${label} stopped answering its health check during its sleep call ` +
        `(${sleepWatchMisses} checks in a row, ${formatDuration(sleepWatchCheckMs)} each)`,
    );
    this.name = "EngineFrozen";
  }
}

/**
 * Runs `sleep` (given a signal that abandons it) while asking the engine's `/health`, on `clock`.
 * Resolves or rejects as the sleep call does, or rejects with EngineFrozen, the call aborted, as
 * soon as the engine misses its checks. Every timer of the watch is cancelled when it ends.
 */
export async function watchedSleep(
  clock: Clock,
  engine: Pick<Engine, "healthy">,
  label: string,
  sleep: (signal: AbortSignal) => Promise<void>,
): Promise<void> {
  const abandon = new AbortController();
  let timer: { cancel(): void } | undefined;
  let ended = false;
  let misses = 0;
  const frozen = new Promise<never>((_, reject) => {
    const check = () => {
      // The answer, or false when none came within its time on the clock (the engine client's own
      // timeout is real time: a manual clock in tests would never reach it).
      const answered = new Promise<boolean>((resolve) => {
        timer = clock.setTimeout(() => resolve(false), sleepWatchCheckMs);
        engine.healthy(sleepWatchCheckMs).then(resolve, () => resolve(false));
      });
      void answered.then((healthy) => {
        timer?.cancel();
        if (ended) return;
        misses = healthy ? 0 : misses + 1;
        if (misses >= sleepWatchMisses) reject(new EngineFrozen(label));
        else timer = clock.setTimeout(check, healthy ? sleepWatchIntervalMs : 0);
      });
    };
    timer = clock.setTimeout(check, sleepWatchIntervalMs);
  });
  try {
    await Promise.race([sleep(abandon.signal), frozen]);
  } catch (error) {
    // The call is abandoned, not left to run out its own timeout on a connection nobody reads.
    if (error instanceof EngineFrozen) abandon.abort(error);
    throw error;
  } finally {
    ended = true;
    timer?.cancel();
  }
}
