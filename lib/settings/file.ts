import { z } from "zod";
import { urlCredentials } from "../url-credentials.ts";
import { byteLimit, byteSize, modelId, slotName, timeout } from "./fields.ts";
import { localModel, tierSettings } from "./model.ts";
import { slotSettings } from "./slot.ts";

/** The whole snooze.yaml. */
export const snoozeFile = z.strictObject({
  defaults: tierSettings
    .optional()
    .meta({ description: "Tier settings every model inherits unless it sets its own." }),
  hostMemoryBudget: byteSize.optional().meta({
    description:
      "Host RAM all level-1 sleepers may use together; past it the longest asleep goes to level 2 (a slot's member is stopped instead, as after deepSleepAfter).",
  }),
  maxBodySize: byteLimit("every request with a body would be refused (413)")
    .optional()
    .meta({ description: "Largest request body the activator reads (413 past it)." }),
  maxHeldBytes: byteLimit("every request with a body would be refused (503 held_bytes_exceeded)")
    .optional()
    .meta({
      description:
        "Request body bytes the activator may keep at once for requests being read or held, all models together; past it a 503 `held_bytes_exceeded` with Retry-After (a body larger than it alone, like one over `maxBodySize`, is a 413 `request_too_large`).",
    }),
  bodyTimeout: timeout.optional().meta({
    description:
      "How long a request body that is still arriving may go without bringing at least 1 KiB (or its end); past it the request gets a 408 `request_timeout`, the bytes it held count no more against `maxHeldBytes`, and its connection is closed, so uploads that stall or trickle cannot keep others out. `never` turns it off.",
  }),
  eventSink: z
    // One message for a wrong scheme (`ftp://`) and for no URL at all: zod says "Invalid URL" to both.
    .url({ protocol: /^https?$/, message: "expected an http or https URL" })
    // As `--event-sink` and K_SINK are checked (sinkUrlProblem): a password `p%ss` failed every event.
    .superRefine((url, ctx) => {
      const parsed = URL.parse(url);
      const credentials = parsed && urlCredentials(parsed);
      if (credentials && "problem" in credentials)
        ctx.addIssue({ code: "custom", message: credentials.problem });
    })
    .optional()
    .meta({
      description:
        "Where tier changes go as CloudEvents (dev.snooze.replica.woke, ...): a Knative Broker or any HTTP endpoint. Without it, Knative SinkBinding's `K_SINK` is used when set.",
    }),
  eventMode: z.enum(["binary", "structured"]).optional().meta({
    description:
      "How CloudEvents go to the sink: `binary` (ce-* headers, the data as the body, as Knative's sources send) or `structured` (one application/cloudevents+json document).",
  }),
  models: z.record(modelId, localModel).refine((models) => Object.keys(models).length > 0, {
    message: "at least one model is required",
  }),
  slots: z.record(slotName, slotSettings).optional(),
});

export type SnoozeFileInput = z.input<typeof snoozeFile>;
export type SnoozeFile = z.output<typeof snoozeFile>;
