/**
 * Seeded randomness: the simulator must give the same text and the same jitter
 * for the same inputs and `--seed`, so tests and benchmarks repeat exactly.
 */

/** FNV-1a, 32 bits: a stable hash of a string for seeding. */
export function hashString(text: string, seed = 0): number {
  let hash = (0x811c9dc5 ^ seed) >>> 0;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}

/** A small, fast PRNG (mulberry32) returning floats in [0, 1). */
export function createRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4_294_967_296;
  };
}

/** A value spread uniformly over mean ± jitter, never below zero. */
export function jittered(mean: number, jitter: number, random: () => number): number {
  if (jitter <= 0) return mean;
  return Math.max(0, mean + (random() * 2 - 1) * jitter);
}
