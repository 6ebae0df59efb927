import { z } from "zod";
import { duration, finiteDuration } from "./fields.ts";

/**
 * The slot's device as NVIDIA_VISIBLE_DEVICES names one GPU: an index, a GPU UUID (`GPU-` and hex
 * digits, or a prefix of them, as the NVIDIA container runtime takes), or a MIG device: `MIG-<uuid>`
 * (drivers from R470), `MIG-GPU-<uuid>/<gi>/<ci>` (before), or `<gpu index>:<mig index>`. Not a
 * list, and not the runtime's words `all`, `none` or `void` (or empty), which name no one GPU.
 */
const deviceForm =
  /^([0-9]+|[0-9]+:[0-9]+|GPU-[0-9a-fA-F][0-9a-fA-F-]*|MIG-[0-9a-fA-F][0-9a-fA-F-]*|MIG-GPU-[0-9a-fA-F][0-9a-fA-F-]*[/][0-9]+[/][0-9]+)$/;
const deviceMessage =
  'expected one GPU: an index ("0"), a GPU UUID ("GPU-" then hex digits and dashes, as `nvidia-smi -L` shows it) or a MIG device ("MIG-" then its UUID, "MIG-GPU-<uuid>/<gi>/<ci>", or "<gpu>:<mig>" such as "0:1"); not a list, "all", "none" or "void"';
export const slotDevice = z
  .string()
  .max(128, { message: `is too long: at most 128 characters; ${deviceMessage}`, abort: true })
  .regex(deviceForm, { message: deviceMessage });

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
  device: slotDevice.optional().meta({
    description:
      'The one GPU the members share: an index ("0"), a GPU UUID ("GPU-…") or a MIG device ("MIG-…", or GPU and MIG index such as "0:1").',
  }),
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
