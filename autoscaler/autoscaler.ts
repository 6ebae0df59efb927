import { hostname } from "node:os";
import type { Registry } from "prom-client";
import { type Clock, systemClock } from "../lib/clock.ts";
import { CloudEventSink } from "../lib/cloudevents.ts";
import type { ControlPlane, DemandHint } from "../lib/control-plane.ts";
import type { Logger } from "../lib/log.ts";
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import type { SnoozeConfig } from "../lib/settings/index.ts";
import { demotionsForBudget, type LevelOneSleeper } from "./host-memory.ts";
import { autoscalerMetrics } from "./metrics.ts";
import { ModelController, type ModelState } from "./model-controller.ts";
import type { Platform } from "./platform.ts";
import { Slot, type SlotStatus, slotMetrics } from "./slot.ts";
import { cloudEventFor } from "./tier-events.ts";

export interface AutoscalerOptions {
  config: SnoozeConfig;
  platform: Platform;
  log: Logger;
  registry: Registry;
  clock?: Clock;
}

/**
 * The control plane of one machine: a controller per model over a platform,
 * the host-memory budget across them, and the ControlPlane seam the activator
 * talks to.
 */
export class Autoscaler implements ControlPlane {
  private readonly controllers = new Map<string, ModelController>();
  private readonly listeners = new Set<(event: ReplicaEvent) => void>();
  private readonly slots = new Map<string, Slot>();
  private readonly sink?: CloudEventSink;
  private readonly lastTier = new Map<string, Tier>();
  private readonly config: SnoozeConfig;
  private readonly platform: Platform;

  constructor(options: AutoscalerOptions) {
    this.config = options.config;
    this.platform = options.platform;
    const metrics = autoscalerMetrics(options.registry);
    const clock = options.clock ?? systemClock;
    const slotMetricSet = slotMetrics(options.registry);
    if (options.config.eventSink) {
      this.sink = new CloudEventSink(
        options.config.eventSink,
        `/snooze/${hostname()}`,
        options.log,
        options.registry,
      );
    }
    for (const slot of options.config.slots.values()) {
      this.slots.set(slot.name, new Slot(slot, { clock, log: options.log, metrics: slotMetricSet }));
    }
    for (const model of options.config.models.values()) {
      const slot = model.slot === undefined ? undefined : this.slots.get(model.slot);
      this.controllers.set(
        model.id,
        new ModelController(model, {
          slot,
          platform: options.platform,
          clock,
          log: options.log,
          metrics,
          emit: (event) => {
            for (const listener of this.listeners) listener(event);
            this.announce(event);
          },
          onLevelOneChanged: () => this.enforceHostMemory(),
        }),
      );
      slot?.add(this.controllers.get(model.id)!);
    }
    options.platform.onExit((replica, reason) =>
      this.controllers.get(replica.model)?.replicaExited(replica, reason),
    );
  }

  demand(model: string, hint?: DemandHint): void {
    this.controllers.get(model)?.demand(hint?.unreachable);
  }

  stats(model: string, inFlight: number, held: number, oldestHeldMs?: number): void {
    this.controllers.get(model)?.stats(inFlight, held, oldestHeldMs);
  }

  watch(listener: (event: ReplicaEvent) => void): () => void {
    this.listeners.add(listener);
    for (const controller of this.controllers.values()) listener(controller.event());
    return () => this.listeners.delete(listener);
  }

  states(): ModelState[] {
    return [...this.controllers.values()].map((c) => c.state());
  }

  slotStatuses(): SlotStatus[] {
    return [...this.slots.values()].map((slot) => slot.status());
  }

  controller(model: string): ModelController | undefined {
    return this.controllers.get(model);
  }

  /** Stops every engine; used on shutdown, after the activator has answered what it holds. */
  async close(): Promise<void> {
    for (const slot of this.slots.values()) slot.close();
    await Promise.all([...this.controllers.values()].map((c) => c.close()));
    await this.platform.close();
  }

  /** Tier changes worth telling the world go to the CloudEvents sink, if one is set. */
  private announce(event: ReplicaEvent): void {
    // By model: local mode runs one replica per model, whose id is only known once it started.
    const from = this.lastTier.get(event.model) ?? "cold";
    this.lastTier.set(event.model, event.tier);
    const news = this.sink && cloudEventFor(from, event);
    if (news) this.sink!.emit(news.type, event.model, news.data);
  }

  private enforceHostMemory(): void {
    if (!Number.isFinite(this.config.hostMemoryBudget)) return;
    const sleepers = [...this.controllers.values()]
      .map((c) => c.levelOneSleeper())
      .filter((s): s is LevelOneSleeper => s !== undefined);
    for (const model of demotionsForBudget(sleepers, this.config.hostMemoryBudget))
      this.controllers.get(model)?.demote();
  }
}
