import type { Clock } from "../lib/clock.ts";
import { formatDuration } from "../lib/duration.ts";
import { isLocalFailure } from "./engine-client.ts";
import type { Engine } from "./platform.ts";

/**
 * Watches an engine while one of its long calls runs: a sleep, a wake, a warm-up. vLLM's API server
 * is async and the work runs in the engine core, so `/health` answers throughout each of them; an
 * engine that stops answering it is frozen (SIGSTOP, a hung process) or dead, and its call would
 * otherwise hold the model, its held requests, or its whole slot, until the call's own timeout (a
 * wake's time, 2 minutes by default; a start's, 10). Its own module: the controller only wraps its
 * long engine calls in it.
 */

/**
 * How long after the call began, and after each answer, `/health` is asked: the order of the ready
 * engines' re-check (5 s per check), so a frozen engine is found in seconds while a healthy one is
 * asked a handful of trivial questions during a sleep of a minute.
 */
export const callWatchIntervalMs = 5_000;
/** How long each `/health` may take: as long as a ready engine's re-check gives it. */
export const callWatchCheckMs = 5_000;
/**
 * Checks in a row that must go unanswered before the call is given up. Two, not one: an engine
 * moving tens of GB into or out of the GPU loads its host, and its API server may miss one answer;
 * a wrong verdict costs a cold start (minutes), a second check costs one `callWatchCheckMs` more.
 * The second is asked at once after the first miss, whose timeout has already been waited out.
 */
export const callWatchMisses = 2;

/** The engine stopped answering its health check during one of its calls. */
export class EngineFrozen extends Error {
  /** Read as a call that got no answer in its time: a stuck engine is not asked anything more. */
  readonly timedOut = true;
  constructor(label: string, during: string) {
    super(
      `${label} stopped answering its health check during ${during} ` +
        `(${callWatchMisses} checks in a row, ${formatDuration(callWatchCheckMs)} each)`,
    );
    this.name = "EngineFrozen";
  }
}

/** Which engine a watched call goes to, and what it is (`during`: "its warm-up", for the error). */
export interface WatchedCall {
  engine: Pick<Engine, "healthy">;
  label: string;
  during: string;
  /**
   * Whoever began the call gives it up with this (the start it belongs to was stopped, Snooze shuts
   * down): the call is aborted, so its connection does not hold up the engine's own shutdown.
   */
  stop?: AbortSignal;
}

/**
 * Runs `call` (given a signal that abandons it) while asking the engine's `/health`, on `clock`.
 * Resolves or rejects as the call does; rejects with EngineFrozen, the call aborted, as soon as the
 * engine misses its checks; rejects with the stop's reason, the call aborted, as soon as `stop`
 * aborts. Every timer of the watch is cancelled when it ends.
 */
export async function watchedCall<T>(
  clock: Clock,
  { engine, label, during, stop }: WatchedCall,
  call: (signal: AbortSignal) => Promise<T>,
): Promise<T> {
  const abandon = new AbortController();
  let timer: { cancel(): void } | undefined;
  let ended = false;
  let misses = 0;
  const frozen = new Promise<never>((_, reject) => {
    const check = () => {
      // The answer, or false when none came within its time on the clock (the engine client's own
      // timeout is real time: a manual clock in tests would never reach it).
      // Undefined when this process could not ask (out of file descriptors): that says nothing of
      // the engine, so it is no miss, and the engine is asked again after the interval (found by an
      // outside tester: Snooze's own shortage stopped healthy engines).
      const answered = new Promise<boolean | undefined>((resolve) => {
        timer = clock.setTimeout(() => resolve(false), callWatchCheckMs);
        engine
          .healthy(callWatchCheckMs)
          .then(resolve, (error: unknown) => resolve(isLocalFailure(error) ? undefined : false));
      });
      void answered.then((healthy) => {
        timer?.cancel();
        if (ended) return;
        if (healthy !== undefined) misses = healthy ? 0 : misses + 1;
        if (misses >= callWatchMisses) reject(new EngineFrozen(label, during));
        else timer = clock.setTimeout(check, healthy === false ? 0 : callWatchIntervalMs);
      });
    };
    timer = clock.setTimeout(check, callWatchIntervalMs);
  });
  let onStop: (() => void) | undefined;
  const stopped = new Promise<never>((_, reject) => {
    onStop = () => reject(stop?.reason);
    if (stop?.aborted) onStop();
    else stop?.addEventListener("abort", onStop, { once: true });
  });
  try {
    return await Promise.race([call(abandon.signal), frozen, stopped]);
  } catch (error) {
    // The call is abandoned, not left to run out its own timeout on a connection nobody reads.
    if (!abandon.signal.aborted) abandon.abort(error);
    throw error;
  } finally {
    ended = true;
    timer?.cancel();
    if (onStop) stop?.removeEventListener("abort", onStop);
  }
}
