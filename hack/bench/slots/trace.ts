import { createRandom, hashString } from "../../sim/random.ts";

/**
 * A mixed-demand trace for one slot, generated from a seed.
 *
 * Shape: bursts of demand that alternate between the slot's members (each
 * burst goes to a different member than the one before it). A burst lasts a
 * random time; within it, requests come in clumps (an agent or a user firing a
 * few requests at once) at a random clump rate, so several are in flight
 * together. The next burst starts a random gap after the current one ends; a
 * negative gap means the next member's users arrive while the current burst
 * is still going (an overlap, where the slot policy matters most). Beside the
 * slot, one background model gets a steady Poisson stream all along; it lives
 * on its own GPU and is there to show that the slot does not disturb it.
 * Token counts are log-normal (a few long prompts and long answers).
 */
export interface TraceRequest {
  id: number;
  model: string;
  /** Arrival, ms from the start of the trace. */
  at: number;
  inputTokens: number;
  outputTokens: number;
  /** Index of the burst it belongs to; undefined for background requests. */
  burst?: number;
}

export interface Burst {
  index: number;
  model: string;
  start: number;
  end: number;
  requests: number;
}

export interface TokenShape {
  median: number;
  /** Standard deviation of the natural log. */
  sigma: number;
  min: number;
  max: number;
}

export interface TraceShape {
  durationMs: number;
  /** The slot's members; bursts alternate between them. */
  members: string[];
  background: { model: string; requestsPerSecond: number };
  burstMs: [number, number];
  /** From the end of a burst to the start of the next; negative values overlap them. */
  gapMs: [number, number];
  clumpsPerSecond: [number, number];
  clumpSize: [number, number];
  inputTokens: TokenShape;
  outputTokens: TokenShape;
}

export interface Trace {
  seed: number;
  shape: TraceShape;
  bursts: Burst[];
  /** Every request, slot members and background, in arrival order. */
  requests: TraceRequest[];
}

export function generateTrace(shape: TraceShape, seed: number): Trace {
  if (shape.members.length < 2) throw new RangeError("a slot trace needs at least two members");
  // Separate streams, so that changing one part of the shape leaves the others as they were.
  const burstRandom = createRandom(hashString("bursts", seed));
  const backgroundRandom = createRandom(hashString("background", seed));
  const tokenRandom = createRandom(hashString("tokens", seed));
  const uniform = (random: () => number, [min, max]: [number, number]) => min + random() * (max - min);
  const arrivals: Omit<TraceRequest, "id" | "inputTokens" | "outputTokens">[] = [];
  const bursts: Burst[] = [];

  let start = Math.round(uniform(burstRandom, [1_000, 10_000]));
  let previous: string | undefined;
  while (start < shape.durationMs) {
    const others = shape.members.filter((m) => m !== previous);
    const model = others[Math.floor(burstRandom() * others.length)]!;
    const end = Math.min(shape.durationMs, start + Math.round(uniform(burstRandom, shape.burstMs)));
    const clumpRate = uniform(burstRandom, shape.clumpsPerSecond) / 1000;
    const burst: Burst = { index: bursts.length, model, start, end, requests: 0 };
    // The first clump opens the burst; the next ones follow a Poisson process.
    for (let t = start; t < end; t += exponential(burstRandom, clumpRate)) {
      const size = Math.floor(uniform(burstRandom, [shape.clumpSize[0], shape.clumpSize[1] + 1]));
      // A clump's requests leave the client together; a millisecond apart keeps their order explicit.
      for (let i = 0; i < size; i++) arrivals.push({ model, at: Math.round(t) + i, burst: burst.index });
      burst.requests += size;
    }
    bursts.push(burst);
    previous = model;
    start = Math.max(start + 1_000, end + Math.round(uniform(burstRandom, shape.gapMs)));
  }

  const rate = shape.background.requestsPerSecond / 1000;
  if (rate > 0)
    for (
      let t = exponential(backgroundRandom, rate);
      t < shape.durationMs;
      t += exponential(backgroundRandom, rate)
    )
      arrivals.push({ model: shape.background.model, at: Math.round(t) });

  arrivals.sort((a, b) => a.at - b.at);
  const requests = arrivals.map((arrival, id) => ({
    id,
    ...arrival,
    inputTokens: logNormal(tokenRandom, shape.inputTokens),
    outputTokens: logNormal(tokenRandom, shape.outputTokens),
  }));
  return { seed, shape, bursts, requests };
}

/** Bursts that begin before the previous one has ended. */
export function overlappingBursts(trace: Trace): number {
  return trace.bursts.filter((b, i) => i > 0 && b.start < trace.bursts[i - 1]!.end).length;
}

function exponential(random: () => number, ratePerMs: number): number {
  return -Math.log(1 - random()) / ratePerMs;
}

function logNormal(random: () => number, shape: TokenShape): number {
  // Box–Muller: one standard normal from two uniforms.
  const normal = Math.sqrt(-2 * Math.log(1 - random())) * Math.cos(2 * Math.PI * random());
  const value = Math.round(Math.exp(Math.log(shape.median) + shape.sigma * normal));
  return Math.min(shape.max, Math.max(shape.min, value));
}
