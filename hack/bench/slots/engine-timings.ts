import { createRandom, hashString, jittered } from "../../sim/random.ts";
import type { TraceRequest } from "./trace.ts";

/**
 * How long a simulated vLLM engine takes for what the slot asks of it, in
 * virtual milliseconds. Sleep at level 1 copies the weights to host RAM (sub-
 * second), waking from it copies them back (seconds); level 2 dropped them, so
 * its wake reloads them from disk. A request takes its prefill plus its decode
 * at a per-sequence token rate; the engine runs up to the model's
 * `concurrency` requests at once and the activator holds the rest.
 */
export interface EngineTimings {
  startMs: number;
  stopMs: number;
  sleepL1Ms: number;
  wakeL1Ms: number;
  /** Level 2 sleep (from awake, or deepening a level-1 sleeper). */
  sleepL2Ms: number;
  /** Wake from level 2, weights reload included. */
  wakeL2Ms: number;
  /** The 1-token request after every start and wake. */
  warmupMs: number;
  prefillTokensPerSecond: number;
  decodeTokensPerSecond: number;
  /** Every start, stop, sleep and wake takes its time ± this fraction. */
  jitter: number;
}

export type EngineOperation = "start" | "stop" | "sleep-1" | "sleep-2" | "wake-1" | "wake-2" | "warmup";

const base: Record<EngineOperation, (t: EngineTimings) => number> = {
  start: (t) => t.startMs,
  stop: (t) => t.stopMs,
  "sleep-1": (t) => t.sleepL1Ms,
  "sleep-2": (t) => t.sleepL2Ms,
  "wake-1": (t) => t.wakeL1Ms,
  "wake-2": (t) => t.wakeL2Ms,
  warmup: (t) => t.warmupMs,
};

/**
 * The duration of the `count`-th `operation` of `model`'s engine. Seeded by
 * its name and position rather than drawn from one stream, so policies that
 * wake engines in different orders still see the same engine behaviour.
 */
export function operationMs(
  timings: EngineTimings,
  model: string,
  operation: EngineOperation,
  count: number,
  seed: number,
): number {
  const mean = base[operation](timings);
  const random = createRandom(hashString(`${model}:${operation}:${count}`, seed));
  return Math.round(jittered(mean, mean * timings.jitter, random));
}

/** How long a request runs on an awake engine once dispatched (batching effects are not modelled). */
export function serviceMs(request: TraceRequest, timings: EngineTimings): number {
  const seconds =
    request.inputTokens / timings.prefillTokensPerSecond +
    request.outputTokens / timings.decodeTokensPerSecond;
  return Math.max(1, Math.round(seconds * 1000));
}
