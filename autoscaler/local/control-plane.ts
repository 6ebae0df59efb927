import { type Clock, systemClock } from "../../lib/clock.ts";
import { type CloudEventSink, createEventSink } from "../../lib/cloudevents.ts";
import type { ControlPlane } from "../../lib/control-plane.ts";
import type { Logger } from "../../lib/log.ts";
import type { Registry } from "../../lib/prometheus.ts";
import type { ModelConfig, SnoozeConfig } from "../../lib/settings/index.ts";
import { Autoscaler } from "../autoscaler.ts";
import type { ModelController } from "../model-controller.ts";
import type { ModelTarget } from "../model-controller-api.ts";
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
  /** How often ready engines are rechecked (default 30 s). */
  selfHealIntervalMs?: number;
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
    sink: localEventSink(config, {
      source: options.eventSource ?? "/snooze/local",
      log: options.log,
      registry: options.registry,
    }),
    hostMemoryBudget: config.hostMemoryBudget,
    // In one process the activator's view is exact and immediate: no grace, no expiry.
    drainGraceMs: 0,
    activatorExpiryMs: Number.POSITIVE_INFINITY,
    selfHealIntervalMs: options.selfHealIntervalMs,
    learningStore: options.stateDir === undefined ? undefined : learningFile(options.stateDir, options.log),
  });
  for (const model of config.models.values()) addLocalModel(autoscaler, config, model);
  return autoscaler;
}

/** The sink of snooze.yaml's `eventSink` and `eventMode` (else Knative's `K_SINK`); none without either. */
export function localEventSink(
  config: Pick<SnoozeConfig, "eventSink" | "eventMode">,
  options: { source: string; log: Logger; registry: Registry },
): CloudEventSink | undefined {
  return createEventSink({ configured: config.eventSink, mode: config.eventMode, ...options });
}

/** The target of a model of snooze.yaml: on demand, one replica at most. */
export function localTarget(model: ModelConfig): ModelTarget {
  return { key: model.id, config: model, minReplicas: 0, maxReplicas: 1 };
}

/**
 * Adds one model of `config` and leads it at once (and its slot, if the slot is new): at start, and
 * when a config reload adds it.
 */
export function addLocalModel(
  autoscaler: Autoscaler,
  config: SnoozeConfig,
  model: ModelConfig,
): ModelController {
  const slot = model.slot === undefined ? undefined : config.slots.get(model.slot);
  const slotExisted = slot !== undefined && autoscaler.slots.has(slot.name);
  const controller = autoscaler.addModel(localTarget(model), {
    slot: slot ? { key: slot.name, config: slot } : undefined,
    holding: () => true,
  });
  if (slot && !slotExisted) autoscaler.slots.get(slot.name)?.lead();
  controller.lead();
  return controller;
}

/**
 * The data plane ↔ control plane seam as an in-process object. The activator's running totals
 * (`flow`) stay behind: only the demand metric that external scalers read on Kubernetes uses them.
 * Passed on, every model's controller kept its last 5 s of reports, rebuilt each second, that no
 * one read (issue 14: they moved to the old generation, ≈ 6 KiB/s with 50 idle models).
 */
export function inProcessControlPlane(autoscaler: Autoscaler): ControlPlane {
  return {
    demand: (model, hint) =>
      void autoscaler.demand(localActivator, model, hint?.unreachable, undefined, hint?.load),
    stats: (model, { flow: _flow, routed: _routed, ...load }) =>
      void autoscaler.stats(localActivator, model, load),
    watch: (listener) => autoscaler.watch(listener),
  };
}
