/**
 * A person's sleep or stop waited for (`snooze sleep`, `snooze stop`, the admin API): done once
 * nothing is awake, taken back by a request that comes before a sleep or stop is sent, replaced by
 * a later ask, or timed out within what an admin call waits. The controller parks the model and
 * the next passes act; this only tells how it ended.
 */
import { adminTimeoutMs } from "../lib/control-protocol.ts";
import { isAsleep } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import type { ModelControllerDeps, ParkOutcome } from "./model-controller-api.ts";
import type { ModelWaiters } from "./model-waiters.ts";
import type { ReplicaRecord } from "./replica-record.ts";

/** What waiting for a person's sleep or stop reads of a model's controller. */
export interface ParkHost {
  readonly deps: Pick<ModelControllerDeps, "clock">;
  readonly records: ReadonlyMap<string, ReplicaRecord>;
  readonly waiters: Pick<ModelWaiters, "settle">;
  /** A person's sleep (its level) or stop, until a request or a wake takes the model back. */
  readonly parked?: 1 | 2 | "stop";
  /** How many sleeps and stops people asked for: a later one replaces an earlier one. */
  parkAsks: number;
  /** Engines' sleeps sent and not answered yet. */
  readonly sleepsUnderWay: number;
  /** When a replica's sleep or stop was last sent (past the point a request can take it back). */
  readonly releaseSentAt?: number;
  /** The last sleep call that failed (its engine was stopped instead). */
  readonly sleepFailure?: { at: number; reason: string };
  load(): { held: number };
  pendingReplicas(): number;
}

/**
 * A request takes a sleep or stop back only before it reaches an engine: once a replica's sleep
 * or stop has been sent (it is leaving), the person waits for that to end and hears how it went,
 * even if a request has since asked for the model again (and wakes it afterwards).
 */
export async function park(
  c: ParkHost,
  verb: "sleep" | "stop",
  done: () => boolean,
  timeoutMs: number,
): Promise<ParkOutcome> {
  const asked = c.deps.clock.now();
  const ask = ++c.parkAsks;
  const since = (at: number | undefined) => (at ?? Number.NEGATIVE_INFINITY) >= asked;
  const leaving = () => c.sleepsUnderWay > 0 || [...c.records.values()].some((r) => r.leaving);
  const takenBack = () => c.parked === undefined && !leaving() && !since(c.releaseSentAt);
  // Requests held before the ask are served first (a slot member's may still wait for the slot):
  // until they are, the model is not parked as asked, however it looks now.
  const served = () => c.load().held === 0;
  // A later sleep or stop replaced this one (a stop, then a sleep): done once the model is parked
  // as that one asked; the answer names the tier it is in.
  const replaced = () => c.parkAsks !== ask && quiet(c) && served();
  const finished = () =>
    (done() && served()) || replaced() || (c.parked === undefined && !leaving() && since(c.releaseSentAt));
  if (!(await c.waiters.settle(finished, timeoutMs, takenBack)))
    return takenBack() ? "taken-back" : "timed-out";
  // Parked, but not as asked: an engine whose sleep failed was stopped (see sleepFailed()).
  return verb === "sleep" && since(c.sleepFailure?.at) ? "stopped-instead" : "done";
}

/**
 * A person's sleep or stop may wait for an activation under way, the requests held for it, then
 * a drain; never longer than an admin call waits for its answer.
 */
export function parkTimeoutMs(config: ModelConfig): number {
  const finite = (ms: number) => (Number.isFinite(ms) ? ms : adminTimeoutMs);
  const activation = Math.max(finite(config.startTimeout), finite(config.wakeTimeout));
  return Math.min(activation + finite(config.drainTimeout) + 60_000, adminTimeoutMs);
}

/** Nothing awake and nothing under way. */
export function quiet(c: Pick<ParkHost, "records" | "pendingReplicas">): boolean {
  return (
    [...c.records.values()].every((r) => !r.busy && (isAsleep(r.tier) || r.tier === "cold")) &&
    c.pendingReplicas() === 0
  );
}
