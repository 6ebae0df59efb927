import { z } from "zod";
import { duration, finiteDuration } from "./fields.ts";

/** A slot: one exclusive accelerator shared by several models, one resident at a time. */
export const slotSettings = z.strictObject({
  policy: z
    .enum(["sticky", "fifo", "priority"])
    .optional()
    .meta({ description: "Who gets the slot next: sticky (default), fifo, or priority." }),
  minResidency: finiteDuration("the resident would keep the slot from every other member")
    .optional()
    .meta({ description: "A resident keeps the slot at least this long." }),
  swapCooldown: finiteDuration("the slot would never swap again")
    .optional()
    .meta({ description: "Minimum time between two swaps on the slot." }),
  drainTimeout: finiteDuration("a request that never ends would block every swap").optional().meta({
    description:
      "How long a swap waits for the incumbent's in-flight requests (or the model's own drainTimeout, if shorter); those still running then are ended (`drain_timeout`) and the incumbent sleeps.",
  }),
  maxWait: duration
    .optional()
    .meta({ description: "The longest any member with held requests may be passed over." }),
  preemptAfter: duration
    .optional()
    .meta({ description: "How long a higher-priority member waits before it may preempt a busy lower one." }),
  device: z
    .string()
    .optional()
    .meta({ description: "The accelerator the members share (a GPU index or device id)." }),
});

export type SlotSettings = z.output<typeof slotSettings>;

export const builtinSlotDefaults = {
  policy: "sticky" as "sticky" | "fifo" | "priority",
  minResidency: 30_000,
  swapCooldown: 5_000,
  drainTimeout: 60_000,
  maxWait: 120_000,
  preemptAfter: 60_000,
  device: undefined as string | undefined,
};
