import { z } from "zod";

/**
 * What the autoscaler learned of one model, as it is kept across restarts: in the state file of
 * local mode (`<state dir>/learning.json`) and in a Model's `status.learning` on Kubernetes. Small
 * and bounded: sparse counts as `index:count` pairs, so a model with no traffic takes a few bytes
 * and a busy one at most the 2016 bins of a week.
 */
const sparseCounts = (bins: number, maxLength: number) =>
  z
    .string()
    .max(maxLength)
    .regex(/^(\d{1,4}:\d+(\.\d+)?(,\d{1,4}:\d+(\.\d+)?)*)?$/, {
      message: 'expected "index:count" pairs separated by commas, like "12:1.5,300:0.25"',
    })
    .refine((text) => text === "" || text.split(",").every((pair) => Number(pair.split(":")[0]) < bins), {
      message: `has a bin index past ${bins - 1}`,
    });

const ms = z.int().min(0).max(86_400_000);

export const arrivalBins = 2016;
export const gapBins = 40;

export const learningSnapshot = z
  .strictObject({
    version: z.literal(1).meta({ description: "Format of this record; 1." }),
    updated: z.iso.datetime().meta({ description: "When it was written." }),
    exposureWeeks: z
      .number()
      .min(0)
      .max(10_000)
      .meta({ description: "Weeks of traffic observed, with older weeks counting less (decayed)." }),
    arrivals: sparseCounts(arrivalBins, 40_000).meta({
      description:
        "Arrivals after a quiet minute, per 5-minute bin of the week (0 = Monday 00:00 UTC), decayed: `bin:count` pairs.",
    }),
    gaps: sparseCounts(gapBins, 2_000).meta({
      description:
        "Idle gaps between bursts of work, per bin of a √2-spaced scale from 1 s, decayed: `bin:count` pairs.",
    }),
    durations: z
      .strictObject({
        wake1: ms.optional().meta({ description: "Wake from level 1, warm-up included." }),
        wake2: ms.optional().meta({ description: "Wake from level 2 (weights reloaded), warm-up included." }),
        sleep1: ms.optional().meta({ description: "Sleep at level 1 (weights copied to host RAM)." }),
        sleep2: ms.optional().meta({ description: "Sleep at level 2 (weights dropped)." }),
        start: ms.optional().meta({ description: "Cold start, from the decision to ready." }),
      })
      .optional()
      .meta({ description: "Measured durations in ms (smoothed): wake and sleep per level, cold start." }),
    prewarm: z
      .strictObject({
        day: z.iso.date().meta({ description: "The UTC day of `spentMs`." }),
        spentMs: ms.meta({ description: "Prewarm time spent that day." }),
      })
      .optional()
      .meta({ description: "The prewarm budget spent today, so a restart does not grant it again." }),
  })
  .meta({
    description:
      "What the autoscaler learned of this model's traffic (arrivals by time of week, idle gaps, measured sleep and wake times), so a restart or a new leader keeps it.",
  });

export type LearningSnapshot = z.output<typeof learningSnapshot>;

/** `index:count` pairs of the non-zero entries, counts rounded to 3 decimals (below 0.001: dropped). */
export function encodeCounts(counts: ArrayLike<number>): string {
  const pairs: string[] = [];
  for (let i = 0; i < counts.length; i++) {
    const value = Math.round(counts[i]! * 1000) / 1000;
    if (value > 0) pairs.push(`${i}:${value}`);
  }
  return pairs.join(",");
}

export function decodeCounts(text: string, length: number): number[] {
  const counts = new Array<number>(length).fill(0);
  if (text === "") return counts;
  for (const pair of text.split(",")) {
    const [index, value] = pair.split(":");
    const i = Number(index);
    if (i >= 0 && i < length) counts[i] = Number(value);
  }
  return counts;
}
