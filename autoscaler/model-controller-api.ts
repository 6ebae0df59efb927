/**
 * What the control plane and a model's controller exchange: the model asked for (`ModelTarget`),
 * what the controller is given (`ModelControllerDeps`), what it shows (`ModelState`), how a
 * person's sleep or stop ended, and what one controller hands the next. Types only, so the
 * callers (the autoscaler, both platforms' wiring) and the controller's own modules share them
 * without importing the controller.
 */
import type { Clock } from "../lib/clock.ts";
import type { Logger } from "../lib/log.ts";
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import type { LearningMetrics } from "./learning-metrics.ts";
import type { AutoscalerMetrics } from "./metrics.ts";
import type { LearningState, ModelLearner } from "./model-learner.ts";
import type { Platform } from "./platform.ts";

/** What one model asks of the control plane: its settings and how many awake replicas. */
export interface ModelTarget {
  /** How the platform names the model: its id locally, `namespace/name` on Kubernetes. */
  key: string;
  config: ModelConfig;
  /** Awake replicas wanted by a person, an HPA or KEDA (`spec.replicas`); undefined: on demand. */
  desired?: number;
  minReplicas: number;
  /** Pods kept, awake or asleep, whatever the idle time (Knative's `min-scale`); 0 when absent. */
  minPods?: number;
  maxReplicas: number;
  /**
   * Of models serving one id, the one with the lowest gets its requests (a `modelPrecedence` on
   * Kubernetes: the oldest Model); without it, the first one added (local mode, whose ids are unique).
   */
  precedence?: string;
}

/** What a model's controller is given: its platform, clock, log and metrics, and whom it tells. */
export interface ModelControllerDeps {
  platform: Platform;
  clock: Clock;
  log: Logger;
  metrics: AutoscalerMetrics;
  /** Every tier change of a replica, and every failure, as the activators and CloudEvents see it. */
  emit(event: ReplicaEvent): void;
  /**
   * Whether this controller may act right now (on Kubernetes: its Lease is renewed within the renew
   * deadline). Checked before every decision and write: a paused holder must not act on resume.
   */
  holding(): boolean;
  /** Time for activators to see `draining` before the engine is checked for idleness. */
  drainGraceMs: number;
  /** How often ready engines are rechecked (default 30 s; tests that count engine calls set it off). */
  selfHealIntervalMs?: number;
  /** An activator that stopped reporting for this long no longer counts (Infinity in-process). */
  activatorExpiryMs: number;
  /** Set for a slot member: the slot decides when it may be awake, and hears of every change. */
  slot?: { changed(): void; readonly config: { readonly drainTimeout: number } };
  /** Something the published status shows changed (Kubernetes writes the Model's status). */
  statusChanged?(): void;
  /** A replica fell asleep at level 1 or left it: the host-memory budget is checked again. */
  levelOneChanged?(): void;
  /** Prewarm and GPU-second metrics. */
  learning?: LearningMetrics;
}

/** How a person's sleep or stop ended: done, taken back by a request or a wake, or not in its time. */
export type ParkOutcome = "done" | "taken-back" | "timed-out" | "stopped-instead";

/** What the admin API and `snooze status` show of a model. */
export interface ModelState {
  id: string;
  key: string;
  tier: Tier;
  since: number;
  /** The most awake replica, for one-replica views. */
  replica?: string;
  address?: string;
  replicas: { id: string; address?: string; tier: Tier; since: number; busy: boolean }[];
  inFlight: number;
  held: number;
  lastStartMs?: number;
  lastWakeMs?: number;
  lastError?: string;
  leading: boolean;
  workloadReplicas: number;
  counts: { tierWrites: number; scales: number };
  /** GPU-seconds, prewarms and the learned ladder. */
  learning?: LearningState;
}

/** What a model's controller passes to the next one of the same model (`handOver`, `takeOver`). */
export interface HandOver {
  learner: ModelLearner;
  lastStartMs?: number;
  lastWakeMs: { 1?: number; 2?: number };
  lastWakeLevel?: 1 | 2;
  /** A wake (a person's, or a slot's grant) waited for a ready replica. */
  wake: boolean;
}
