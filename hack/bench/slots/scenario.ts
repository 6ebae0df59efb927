import { builtinSlotDefaults, builtinTierDefaults } from "../../../lib/settings/index.ts";
import type { EngineTimings } from "./engine-timings.ts";
import type { SimConfig, SimModel } from "./simulator.ts";
import type { TraceShape } from "./trace.ts";

/**
 * The slot benchmark's world: three models of different sizes share one GPU
 * slot, a fourth serves steady traffic on its own GPU. Settings are Snooze's
 * built-in defaults, except a per-replica concurrency of 8 (an engine's
 * batch), so bursts queue in the activator as they would in front of a real
 * engine. Engine timings are plausible for 7B–32B models on one GPU (level-1
 * wake in seconds, sleep sub-second); they are assumptions, not measurements.
 */
const engine = (patch: Partial<EngineTimings>): EngineTimings => ({
  startMs: 45_000,
  stopMs: 1_000,
  sleepL1Ms: 500,
  wakeL1Ms: 3_000,
  sleepL2Ms: 300,
  wakeL2Ms: 15_000,
  warmupMs: 300,
  prefillTokensPerSecond: 4_000,
  decodeTokensPerSecond: 35,
  jitter: 0.2,
  ...patch,
});

export const slotModels: SimModel[] = [
  {
    id: "coder-7b",
    priority: 0,
    inSlot: true,
    initialTier: "asleep-1",
    engine: engine({
      wakeL1Ms: 1_500,
      sleepL1Ms: 300,
      wakeL2Ms: 8_000,
      startMs: 30_000,
      decodeTokensPerSecond: 50,
      prefillTokensPerSecond: 6_000,
      warmupMs: 200,
    }),
  },
  {
    id: "chat-14b",
    priority: 0,
    inSlot: true,
    initialTier: "asleep-1",
    engine: engine({}),
  },
  {
    id: "long-32b",
    priority: 0,
    inSlot: true,
    initialTier: "asleep-1",
    engine: engine({
      wakeL1Ms: 5_500,
      sleepL1Ms: 800,
      wakeL2Ms: 30_000,
      startMs: 75_000,
      decodeTokensPerSecond: 25,
      prefillTokensPerSecond: 2_500,
      warmupMs: 500,
    }),
  },
];

export const backgroundModel: SimModel = {
  id: "assistant-8b",
  priority: 0,
  inSlot: false,
  initialTier: "ready",
  engine: engine({ decodeTokensPerSecond: 45, prefillTokensPerSecond: 5_000 }),
};

export function benchConfig(seed: number): SimConfig {
  const { minResidency, swapCooldown, drainTimeout, maxWait, preemptAfter } = builtinSlotDefaults;
  return {
    models: [...slotModels, backgroundModel],
    slot: { minResidency, swapCooldown, drainTimeout, maxWait, preemptAfter },
    tier: { ...builtinTierDefaults, concurrency: 8 },
    seed,
  };
}

/** One hour of alternating bursts with some overlaps, and the steady background model. */
export const benchTraceShape: TraceShape = {
  durationMs: 60 * 60_000,
  members: slotModels.map((m) => m.id),
  background: { model: backgroundModel.id, requestsPerSecond: 0.2 },
  burstMs: [30_000, 180_000],
  gapMs: [-45_000, 120_000],
  clumpsPerSecond: [0.05, 0.2],
  clumpSize: [1, 4],
  inputTokens: { median: 700, sigma: 0.9, min: 32, max: 8_000 },
  outputTokens: { median: 200, sigma: 0.8, min: 16, max: 2_048 },
};

/** The same shape, 15 minutes: the unit test's trace. */
export const shortTraceShape: TraceShape = { ...benchTraceShape, durationMs: 15 * 60_000 };

export const benchSeed = 4;

/**
 * The reference without sharing: every slot member on a GPU of its own, awake
 * from the start and never put to sleep. Its hold times are what queueing for
 * an engine's concurrency alone costs; the rest of a policy's is the slot's.
 */
export function dedicatedConfig(config: SimConfig): SimConfig {
  return {
    ...config,
    models: config.models.map((m) => (m.inSlot ? { ...m, inSlot: false, initialTier: "ready" } : m)),
    tier: { ...config.tier, sleepAfter: Number.POSITIVE_INFINITY },
  };
}
