import { z } from "zod";
import { duration } from "../settings/fields.ts";
import { slotSettings } from "../settings/slot.ts";
import type { apiVersion } from "./api-group.ts";
import { conditions } from "./condition.ts";

/**
 * The `Slot` resource: one exclusive accelerator that several Models share (they name it in
 * `spec.slot`). Its spec is the slot policy of snooze.yaml (the one schema in lib/settings, same
 * names); its status is written by the one autoscaler replica that holds the slot's Lease.
 */
export const slotSpec = slotSettings.meta({
  description: "Who gets the accelerator next, and how swaps between member Models are paced.",
});

/**
 * A Slot's spec as the autoscaler reads it: any device (it does not use it), so a Slot stored
 * before devices were checked keeps its policy after an upgrade instead of falling back to the
 * defaults (its next write is refused).
 */
export const storedSlotSpec = slotSettings.extend({ device: z.string().optional() });

const transitionSteps = ["draining", "sleeping", "stopping", "waking", "starting"] as const;

export const slotStatus = z.strictObject({
  observedGeneration: z
    .int()
    .min(0)
    .optional()
    .meta({ description: "The metadata.generation this status was computed from." }),
  members: z
    .array(z.string())
    .optional()
    .meta({ description: "The Models whose spec.slot names this slot.", "x-kubernetes-list-type": "set" }),
  resident: z
    .string()
    .optional()
    .meta({ description: "The Model that holds the accelerator (starting, waking, ready or draining)." }),
  transition: z
    .strictObject({
      from: z.string().optional().meta({ description: "The Model giving up the slot, if any." }),
      to: z.string().meta({ description: "The Model taking the slot." }),
      step: z
        .enum(transitionSteps)
        .meta({ description: "draining, sleeping, stopping, waking or starting." }),
      startedAt: z.iso.datetime().meta({ description: "When the swap began." }),
    })
    .optional()
    .meta({ description: "The swap in progress; absent when the slot is settled." }),
  waiting: z
    .array(
      z.strictObject({
        model: z.string().meta({ description: "A member with held requests and no replica on the slot." }),
        since: z.iso.datetime().meta({ description: "When it started waiting." }),
        held: z.int().min(0).optional().meta({ description: "Requests held for it at the last report." }),
      }),
    )
    .optional()
    .meta({
      description: "Members waiting for the slot, oldest first.",
      "x-kubernetes-list-type": "map",
      "x-kubernetes-list-map-keys": ["model"],
    }),
  swapCount: z.int().min(0).optional().meta({ description: "Swaps completed since the slot was created." }),
  lastSwap: z
    .strictObject({
      from: z.string().optional().meta({ description: "The Model that gave up the slot, if any." }),
      to: z.string().meta({ description: "The Model that took it." }),
      finishedAt: z.iso.datetime().meta({ description: "When the swap finished." }),
      duration: duration.optional().meta({ description: "How long the swap took, e.g. 3.1s." }),
    })
    .optional()
    .meta({ description: "The last completed swap." }),
  conditions: conditions.optional(),
});

export type SlotSpecInput = z.input<typeof slotSpec>;
export type SlotStatusInput = z.input<typeof slotStatus>;

/** A Slot object as the API serves it. */
export interface SlotResource {
  apiVersion: typeof apiVersion;
  kind: "Slot";
  metadata: { name: string; namespace?: string; [key: string]: unknown };
  spec?: SlotSpecInput;
  status?: SlotStatusInput;
}
