import { describe, expect, test } from "vitest";
import { ManualClock } from "../test/support/manual-clock.ts";
import { callWatchCheckMs, callWatchIntervalMs, EngineFrozen, watchedCall } from "./engine-call-watch.ts";
import { EngineError } from "./engine-client.ts";

/**
 * An engine whose `/health` answers as `next` says: true, false, never ("hang"), or not asked at
 * all ("local": this process out of file descriptors).
 */
function engine(answers: (boolean | "hang" | "local")[], otherwise: boolean | "hang" | "local" = true) {
  const asked: number[] = [];
  return {
    asked,
    healthy(_timeoutMs?: number): Promise<boolean> {
      asked.push(asked.length);
      const answer = answers.shift() ?? otherwise;
      if (answer === "local")
        return Promise.reject(new EngineError("GET /health: connect EMFILE", undefined, false, true));
      return answer === "hang" ? new Promise<boolean>(() => {}) : Promise.resolve(answer);
    },
  };
}

/** A sleep call that ends when the test says (or never), and records the signal it was given. */
function sleepCall() {
  const call: { signal?: AbortSignal; end?: () => void; fail?: (error: Error) => void } = {};
  const run = (signal: AbortSignal) =>
    new Promise<void>((resolve, reject) => {
      call.signal = signal;
      call.end = resolve;
      call.fail = reject;
    });
  return { call, run };
}

/** The engine's sleep call, watched as the controller watches it. */
const watch = (
  clock: ManualClock,
  health: ReturnType<typeof engine>,
  run: (signal: AbortSignal) => Promise<void>,
  stop?: AbortSignal,
) => watchedCall(clock, { engine: health, label: "engine m-1", during: "its sleep call", stop }, run);

/** The watched call's outcome, once it has one. */
function outcome(promise: Promise<void>) {
  const seen: { settled?: "done" | Error } = {};
  promise.then(
    () => (seen.settled = "done"),
    (error: Error) => (seen.settled = error),
  );
  return seen;
}

describe("watchedCall", () => {
  test("a sleep call that never returns, from an engine that stops answering /health: given up, the call aborted, no timer left", async () => {
    const clock = new ManualClock();
    const health = engine([], "hang");
    const { call, run } = sleepCall();
    const seen = outcome(watch(clock, health, run));
    // First check after the interval; its miss is asked again at once; the second miss gives up.
    const givesUpAt = callWatchIntervalMs + 2 * callWatchCheckMs;
    await clock.advanceAndSettle(givesUpAt - 1);
    expect(seen.settled).toBeUndefined();
    expect(health.asked).toHaveLength(2);
    expect(call.signal?.aborted).toBe(false);
    await clock.advanceAndSettle(1);
    expect(seen.settled).toBeInstanceOf(EngineFrozen);
    expect((seen.settled as Error).message).toBe(
      "engine m-1 stopped answering its health check during its sleep call (2 checks in a row, 5s each)",
    );
    expect(call.signal?.aborted).toBe(true);
    expect(clock.pending).toBe(0);
  });

  test("checks this process could not make (out of file descriptors) are no misses: the call goes on (found by an outside tester)", async () => {
    const clock = new ManualClock();
    const health = engine(["local", "local", false, "local", "local", "local"], true);
    const { call, run } = sleepCall();
    const seen = outcome(watch(clock, health, run));
    // Each is asked again after the interval, as after an answer: a miss between them is one miss.
    await clock.advanceAndSettle(7 * callWatchIntervalMs);
    expect(seen.settled).toBeUndefined();
    expect(call.signal?.aborted).toBe(false);
    call.end?.();
    await clock.advanceAndSettle(0);
    expect(seen.settled).toBe("done");
  });

  test("an engine whose /health fails at once (refused, 503) twice in a row is given up at the first check", async () => {
    const clock = new ManualClock();
    const health = engine([], false);
    const { call, run } = sleepCall();
    const seen = outcome(watch(clock, health, run));
    await clock.advanceAndSettle(callWatchIntervalMs);
    expect(seen.settled).toBeInstanceOf(EngineFrozen);
    expect(health.asked).toHaveLength(2);
    expect(call.signal?.aborted).toBe(true);
    expect(clock.pending).toBe(0);
  });

  test("a slow sleep whose engine answers /health completes; the watch stops with it", async () => {
    const clock = new ManualClock();
    const health = engine([]);
    const { call, run } = sleepCall();
    const seen = outcome(watch(clock, health, run));
    await clock.advanceAndSettle(60_000);
    expect(seen.settled).toBeUndefined();
    expect(health.asked).toHaveLength(60_000 / callWatchIntervalMs);
    call.end?.();
    await clock.settle();
    expect(seen.settled).toBe("done");
    expect(call.signal?.aborted).toBe(false);
    expect(clock.pending).toBe(0);
    await clock.advanceAndSettle(60_000);
    expect(health.asked).toHaveLength(60_000 / callWatchIntervalMs);
  });

  test("one check missed, the next answered: not a freeze (a loaded host may answer late once)", async () => {
    const clock = new ManualClock();
    const health = engine(["hang", true, false, true, "hang", true]);
    const { call, run } = sleepCall();
    const seen = outcome(watch(clock, health, run));
    await clock.advanceAndSettle(60_000);
    expect(health.asked.length).toBeGreaterThan(6);
    expect(seen.settled).toBeUndefined();
    expect(call.signal?.aborted).toBe(false);
    call.end?.();
    await clock.settle();
    expect(seen.settled).toBe("done");
    expect(clock.pending).toBe(0);
  });

  test("a sleep call that fails on its own fails as it did, ended during a check: no timer left", async () => {
    const clock = new ManualClock();
    const health = engine([], "hang");
    const { call, run } = sleepCall();
    const seen = outcome(watch(clock, health, run));
    await clock.advanceAndSettle(callWatchIntervalMs + 1);
    expect(health.asked).toHaveLength(1);
    call.fail?.(new Error("POST /sleep?level=1&mode=wait answered 500"));
    await clock.settle();
    expect((seen.settled as Error).message).toBe("POST /sleep?level=1&mode=wait answered 500");
    expect(clock.pending).toBe(0);
  });

  test("a call whose start is stopped meanwhile is given up at once, its call aborted, no timer left", async () => {
    const clock = new ManualClock();
    const health = engine([]);
    const { call, run } = sleepCall();
    const stop = new AbortController();
    const seen = outcome(watch(clock, health, run, stop.signal));
    await clock.advanceAndSettle(callWatchIntervalMs + 1);
    expect(seen.settled).toBeUndefined();
    stop.abort(new Error("the start was stopped"));
    await clock.settle();
    expect((seen.settled as Error).message).toBe("the start was stopped");
    expect(call.signal?.aborted).toBe(true);
    expect(clock.pending).toBe(0);
  });

  test("the error names the call watched (a warm-up, a wake), and reads as a call that got no answer", () => {
    const frozen = new EngineFrozen("engine m-1", "its warm-up");
    expect(frozen.message).toBe(
      "engine m-1 stopped answering its health check during its warm-up (2 checks in a row, 5s each)",
    );
    expect(frozen.timedOut).toBe(true);
  });
});
