/** Messages between the benchmark and `activator-process.ts`. */

/** Wall-clock times (ms since the epoch, fractional) of one model's last activation. */
export interface Timeline {
  /** The control plane decided to activate (tier waking or starting). */
  activationStart?: number;
  /** Around the engine's wake call: POST /wake_up … until /is_sleeping says false. */
  wakeStart?: number;
  wakeEnd?: number;
  /** After a cold start: the first /health answer of a prober asking every millisecond (the engine listens). */
  listening?: number;
  /** Around the warm-up call (after the wake, or after a start). */
  warmupStart?: number;
  warmupEnd?: number;
  /** Requests held when the engine had woken (before the warm-up). */
  heldAtWakeEnd?: number;
  /** Tier ready: the warm-up is done and held requests are released. */
  ready?: number;
  /** Since the last timeline: when each proxied chat request went to the engine's connection pool. */
  dispatched?: number[];
  /** ... and when the engine's response headers for each came back. */
  upstreamHeaders?: number[];
  /** Connections opened (to the engine, plus any the control plane's own calls opened). */
  connects?: number;
}

export interface RouteView {
  held: number;
  inFlight: number;
  tier: string;
  /** host:port of the engine, once it has one. */
  address?: string;
}

export type ActivatorRequest =
  | { cmd: "memory" }
  | { cmd: "route"; model: string }
  | { cmd: "timeline"; model: string }
  /** Start measuring the event loop's delay (`start`), or stop and read it (`stop`). */
  | { cmd: "loop-delay"; phase: "start" | "stop" }
  /** The garbage collector's pauses of the main thread so far (the process's whole life). */
  | { cmd: "gc" }
  | { cmd: "close" };

/** The activator's memory after a full GC, and then after V8's memory-reducing one. */
export interface MemoryReading {
  /** After two regular full collections: the young generation as the last burst left it. */
  regular: NodeJS.MemoryUsage;
  /** After a memory-reducing ("last resort") collection, which also shrinks the young generation. */
  reduced: NodeJS.MemoryUsage;
}

/** How late the activator's event loop ran a timer asked for every 10 ms: what a turn of it costs a newcomer. */
export interface LoopDelay {
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Collections' pauses of the main thread over the same time: summed, and the longest one. */
  gcMs: number;
  gcMaxMs: number;
}

/** The collections that paused the activator's main thread so far, young and old. */
export interface GcPauses {
  count: number;
  ms: number;
}

export interface ActivatorReply {
  memory?: MemoryReading;
  gc?: GcPauses;
  route?: RouteView;
  timeline?: Timeline;
  loopDelay?: LoopDelay;
}
