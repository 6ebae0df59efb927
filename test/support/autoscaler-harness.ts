import { Registry } from "prom-client";
import { Autoscaler, type AutoscalerOptions } from "../../autoscaler/autoscaler.ts";
import { localActivator, localAutoscaler } from "../../autoscaler/local/control-plane.ts";
import type { ModelController } from "../../autoscaler/model-controller.ts";
import { type Logger, silentLogger } from "../../lib/log.ts";
import type { ReplicaEvent, Tier } from "../../lib/replica-event.ts";
import { parseConfig, type SnoozeConfig } from "../../lib/settings/index.ts";
import { FakePlatform, type FakePlatformOptions } from "./fake-platform.ts";
import { ManualClock } from "./manual-clock.ts";

export interface SentCloudEvent {
  type: string;
  subject: string;
  data: Record<string, unknown>;
  /** What the sink was given besides type, subject and data (the activation's traceparent). */
  extras?: { traceparent?: string; tracestate?: string };
}

export interface HarnessOptions extends Omit<FakePlatformOptions, "clock"> {
  /**
   * Build the Autoscaler directly (as localAutoscaler does, but with these) instead of through
   * `localAutoscaler`: for a fake CloudEvent sink or a leadership the test switches.
   */
  direct?: {
    sink?: boolean;
    holding?: () => boolean;
    drainGraceMs?: number;
    activatorExpiryMs?: number;
  };
  /** How often ready engines are rechecked; off unless asked: most tests count every engine call. */
  selfHealIntervalMs?: number;
  /**
   * Answer held requests when an event carries an error, as the activator does (its held count
   * for the model drops to 0).
   */
  answerErrors?: boolean;
  /** Where the control plane logs; nowhere by default. */
  log?: Logger;
}

/** One control plane on a manual clock over a fake platform, with the events it published. */
export class Harness {
  readonly config: SnoozeConfig;
  readonly clock = new ManualClock();
  readonly platform: FakePlatform;
  readonly autoscaler: Autoscaler;
  readonly events: ReplicaEvent[] = [];
  readonly cloudEvents: SentCloudEvent[] = [];
  readonly registry = new Registry();

  constructor(yaml: string, options: HarnessOptions = {}) {
    this.config = parseConfig(yaml, "test.yaml");
    this.platform = new FakePlatform(this.config.models.keys(), { ...options, clock: this.clock });
    const direct = options.direct;
    if (!direct) {
      this.autoscaler = localAutoscaler({
        config: this.config,
        platform: this.platform,
        log: options.log ?? silentLogger,
        registry: this.registry,
        clock: this.clock,
        selfHealIntervalMs: options.selfHealIntervalMs ?? Number.POSITIVE_INFINITY,
      });
    } else {
      // A sink that keeps what it is given (typed by what the Autoscaler accepts).
      const sink = {
        emit: (
          type: string,
          subject: string,
          data: Record<string, unknown>,
          extras?: { traceparent?: string; tracestate?: string },
        ) => {
          this.cloudEvents.push({ type, subject, data, ...(extras ? { extras } : {}) });
        },
      } as unknown as NonNullable<AutoscalerOptions["sink"]>;
      this.autoscaler = new Autoscaler({
        platform: this.platform,
        clock: this.clock,
        log: options.log ?? silentLogger,
        registry: this.registry,
        sink: direct.sink ? sink : undefined,
        hostMemoryBudget: this.config.hostMemoryBudget,
        drainGraceMs: direct.drainGraceMs ?? 0,
        activatorExpiryMs: direct.activatorExpiryMs ?? Number.POSITIVE_INFINITY,
        selfHealIntervalMs: options.selfHealIntervalMs ?? Number.POSITIVE_INFINITY,
      });
      const holding = direct.holding ?? (() => true);
      for (const model of this.config.models.values()) {
        const slot = model.slot === undefined ? undefined : this.config.slots.get(model.slot);
        this.autoscaler.addModel(
          { key: model.id, config: model, minReplicas: 0, maxReplicas: 1 },
          { slot: slot ? { key: slot.name, config: slot } : undefined, holding },
        );
      }
      for (const slot of this.autoscaler.slots.values()) slot.lead();
      for (const controller of this.autoscaler.controllers) controller.lead();
    }
    this.autoscaler.watch((event) => {
      this.events.push(event);
      if (options.answerErrors && event.error !== undefined) this.stats(event.model, 0, 0);
    });
  }

  controller(id: string): ModelController {
    const controller = this.autoscaler.controller(id);
    if (!controller) throw new Error(`no controller for ${id}`);
    return controller;
  }

  /** A request is held for `model` in the local activator. */
  demand(model: string): void {
    this.autoscaler.demand(localActivator, model);
  }

  stats(model: string, inFlight: number, held: number, activator = localActivator): void {
    this.autoscaler.stats(activator, model, { inFlight, held });
  }

  settle(): Promise<void> {
    return this.clock.settle();
  }

  /** Advances the clock timer by timer, settling promise chains between timers. */
  advance(ms: number, onStep?: () => void): Promise<void> {
    return this.clock.advanceAndSettle(ms, undefined, onStep);
  }

  /** The tiers of `model`'s events (optionally of one replica), in order. */
  tiers(model: string, replica?: string): Tier[] {
    return this.eventsOf(model, replica).map((e) => e.tier);
  }

  eventsOf(model: string, replica?: string): ReplicaEvent[] {
    return this.events.filter((e) => e.model === model && (replica === undefined || e.replica === replica));
  }

  /** Forgets the events, calls and records so far (after setting a scene). */
  mark(): void {
    this.events.length = 0;
    this.cloudEvents.length = 0;
    this.platform.calls.length = 0;
    this.platform.scales.length = 0;
    this.platform.tierRecords.length = 0;
    for (const id of this.platform.allEngineIds()) this.platform.engineOf(id).calls.length = 0;
  }

  /**
   * A cold start as the activator drives one: demand, the replica comes up, the request is
   * dispatched and answered. Returns the new replica's id.
   */
  async serveCold(model: string): Promise<string> {
    this.demand(model);
    await this.settle();
    const ids = this.platform.ids(model);
    const id = ids[ids.length - 1];
    if (!id) throw new Error(`no replica of ${model} was started`);
    if (!this.platform.replica(id)!.up) this.platform.bringUp(id);
    await this.settle();
    const tier = this.controller(model).tier;
    if (tier !== "ready") throw new Error(`${model} is ${tier} after its start, not ready`);
    await this.request(model);
    return id;
  }

  /** One request dispatched and answered at once (in flight, then nothing). */
  async request(model: string): Promise<void> {
    this.stats(model, 1, 0);
    await this.settle();
    this.stats(model, 0, 0);
    await this.settle();
  }
}
