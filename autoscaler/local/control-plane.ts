import type { Registry } from "prom-client";
import { type Clock, systemClock } from "../../lib/clock.ts";
import { createEventSink } from "../../lib/cloudevents.ts";
import type { ControlPlane } from "../../lib/control-plane.ts";
import type { Logger } from "../../lib/log.ts";
import type { SnoozeConfig } from "../../lib/settings/index.ts";
import { Autoscaler } from "../autoscaler.ts";
import type { Platform } from "../platform.ts";
import { learningFile } from "./learning-file.ts";

/** The one activator of local mode, by the name its load is reported under. */
export const localActivator = "local";

export interface LocalAutoscalerOptions {
  config: SnoozeConfig;
  platform: Platform;
  log: Logger;
  registry: Registry;
  clock?: Clock;
  /** The source of outgoing CloudEvents. */
  eventSource?: string;
  /** Where what the models learned is kept across restarts (`learning.json`); none: not kept. */
  stateDir?: string;
}

/**
 * Local mode is the one-replica-set case of the same control plane: every model of snooze.yaml is
 * added once and leads for good (there is no other writer), its slot is a slot of the file.
 */
export function localAutoscaler(options: LocalAutoscalerOptions): Autoscaler {
  const { config } = options;
  const autoscaler = new Autoscaler({
    platform: options.platform,
    clock: options.clock ?? systemClock,
    log: options.log,
    registry: options.registry,
    sink: createEventSink({
      configured: config.eventSink,
      mode: config.eventMode,
      source: options.eventSource ?? "/snooze/local",
      log: options.log,
      registry: options.registry,
    }),
    hostMemoryBudget: config.hostMemoryBudget,
    // In one process the activator's view is exact and immediate: no grace, no expiry.
    drainGraceMs: 0,
    activatorExpiryMs: Number.POSITIVE_INFINITY,
    learningStore: options.stateDir === undefined ? undefined : learningFile(options.stateDir, options.log),
  });
  for (const model of config.models.values()) {
    const slot = model.slot === undefined ? undefined : config.slots.get(model.slot);
    autoscaler.addModel(
      { key: model.id, config: model, minReplicas: 0, maxReplicas: 1 },
      { slot: slot ? { key: slot.name, config: slot } : undefined, holding: () => true },
    );
  }
  for (const slot of autoscaler.slots.values()) slot.lead();
  for (const controller of autoscaler.controllers) controller.lead();
  return autoscaler;
}

/** The data plane ↔ control plane seam as an in-process object. */
export function inProcessControlPlane(autoscaler: Autoscaler): ControlPlane {
  return {
    demand: (model, hint) =>
      void autoscaler.demand(localActivator, model, hint?.unreachable, undefined, hint?.load),
    stats: (model, inFlight, held, oldestHeldMs) =>
      void autoscaler.stats(localActivator, model, inFlight, held, oldestHeldMs),
    watch: (listener) => autoscaler.watch(listener),
  };
}
