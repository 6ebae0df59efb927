import { performance } from "node:perf_hooks";
import type { Clock } from "./clock.ts";
import { memoryReducingCollection } from "./release-startup-memory.ts";

/**
 * An idle server's resident set creeps up for minutes after start-up (issue 14: `snooze serve`
 * with 50 idle models from 79.7 to 80.9 MiB within a minute, more over ten): timers and the
 * once-a-second load reports fill V8's young generation again, and only a memory-reducing
 * collection gives that back, which an idle process never triggers. So once a minute, if the
 * event loop was idle for that minute and the resident set grew by a MiB since the last
 * collection, one more runs (synchronous, 30–80 ms, in a minute in which nothing else ran).
 */

/** How often the process looks at itself. */
export const idleCheckMs = 60_000;
/** Event loop utilization (0–1) under which the last minute counts as idle. */
export const idleUtilization = 0.02;
/** Growth of the resident set since the last collection that is worth one more. */
export const growthBytes = 2 ** 20;

export interface IdleSample {
  /** Event loop utilization since the last sample, 0–1. */
  utilization: number;
  rss: number;
}

/** The decision: idle, and grown enough since the resident set after the last collection. */
export function shouldCollect(sample: IdleSample, rssAfterLastCollection: number): boolean {
  return sample.utilization < idleUtilization && sample.rss - rssAfterLastCollection >= growthBytes;
}

export interface IdleMemoryOptions {
  clock: Clock;
  /** Samples the process; default: event loop utilization since the last call and RSS. */
  sample?: () => IdleSample;
  /** Runs the collection and returns the resident set after it. */
  collect?: () => number;
}

/** Watches the process until `stop()`: the owner of the once-a-minute timer. */
export function releaseMemoryWhenIdle(options: IdleMemoryOptions): { stop(): void } {
  const sample = options.sample ?? utilizationSampler();
  const collect =
    options.collect ??
    (() => {
      memoryReducingCollection();
      return process.memoryUsage.rss();
    });
  let baseline = sample().rss;
  let timer = options.clock.setTimeout(tick, idleCheckMs);
  function tick() {
    const now = sample();
    if (shouldCollect(now, baseline)) baseline = collect();
    timer = options.clock.setTimeout(tick, idleCheckMs);
  }
  return { stop: () => timer.cancel() };
}

function utilizationSampler(): () => IdleSample {
  let last = performance.eventLoopUtilization();
  return () => {
    const since = performance.eventLoopUtilization(last);
    last = performance.eventLoopUtilization();
    return { utilization: since.utilization, rss: process.memoryUsage.rss() };
  };
}
