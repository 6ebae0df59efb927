/**
 * What an operation run on one replica (replica-activation.ts, replica-drain.ts, replica-deepen.ts,
 * replica-recheck.ts) sees of its model's controller: the settings, the lease it runs under, the
 * tier writes and scale-downs it asks for, and the model-wide facts it measures or says (failures,
 * durations, the last release). The controller implements it and stays the one owner of the state
 * and the timers; the operations import this, never the controller, so the layers point one way.
 */
import type { Context } from "@opentelemetry/api";
import type { Logger } from "../lib/log.ts";
import type { Tier } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import type { ActivatorLoads } from "./activator-loads.ts";
import type { ModelControllerDeps } from "./model-controller-api.ts";
import type { ModelLearner } from "./model-learner.ts";
import type { ModelWaiters } from "./model-waiters.ts";
import type { Activation, ReplicaRecord } from "./replica-record.ts";

export interface ReplicaOps {
  readonly id: string;
  readonly key: string;
  readonly config: ModelConfig;
  readonly deps: Pick<ModelControllerDeps, "platform" | "clock" | "metrics" | "drainGraceMs" | "slot">;
  readonly log: Logger;
  readonly learner: ModelLearner;
  /** Counts the controller's leads: an operation begun under one stops at the next (`guard`). */
  readonly leadership: number;
  readonly records: ReadonlyMap<string, ReplicaRecord>;
  /** Each activator's word on the model's load (a drain waits for those that may still route to it). */
  readonly loads: ActivatorLoads;
  /** The slot's swap this model takes part in, and its cap on awake replicas (slot members only). */
  readonly parent?: Context;
  readonly cap?: number;
  readonly failures: number;
  readonly backoffUntil: number;
  readonly prewarmWake: boolean;
  lastError?: string;
  lastActive: number;
  lastStartMs?: number;
  lastWakeMs: { 1?: number; 2?: number };
  lastWakeLevel?: 1 | 2;
  lastRelease: { drainMs: number; sleepMs: number };
  releaseSentAt?: number;
  sleepsUnderWay: number;
  sleepFailure?: { at: number; reason: string };
  /** Throws `NotLeading` once `leadership` is over, or the lease is not held now. */
  guard(leadership: number): void;
  /** The record is still the controller's (its replica has not gone, nor been replaced). */
  present(record: ReplicaRecord): boolean;
  setTier(
    record: ReplicaRecord,
    tier: Tier,
    news?: { estimateMs?: number; error?: string; since?: number },
  ): Promise<void>;
  /** Scales down by one, removing this replica. */
  stopReplica(record: ReplicaRecord): Promise<void>;
  activationFailed(record: ReplicaRecord, reason: string, backTo?: Tier): void;
  succeeded(record: ReplicaRecord): void;
  /** A replica failed on its own: counted in the crash loop; returns the back-off. */
  leftOnItsOwn(reason: string): number;
  beginActivation(kind: "start" | "wake", from: Tier, started?: number): Activation;
  /** The last measured start, or wake from `level`. */
  estimate(kind: "start" | "wake", level?: 1 | 2): number | undefined;
  load(): { inFlight: number; held: number };
  /** A person's sleep with no request held: the level it asked for. */
  sleepWanted(): 1 | 2 | undefined;
  /** The waits on the controller: an engine's exit, a drain's pause. */
  readonly waiters: Pick<ModelWaiters, "settle" | "pause">;
}
