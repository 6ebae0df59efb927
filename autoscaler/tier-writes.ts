import type { Logger } from "../lib/log.ts";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { rewriteDelayMs } from "../lib/rewrite-backoff.ts";
import type { ModelControllerDeps } from "./model-controller-api.ts";
import { NotLeading } from "./operation-errors.ts";
import type { ReplicaRecord } from "./replica-record.ts";

/** What the tier writes need of a model's controller. */
export interface TierWriter {
  readonly key: string;
  readonly deps: Pick<ModelControllerDeps, "platform" | "clock">;
  readonly log: Logger;
  readonly counts: { tierWrites: number };
  /** Counts the controller's leads: a write begun under one is dropped at the next. */
  readonly leadership: number;
  /** Throws `NotLeading` once `leadership` is over, or the lease is not held now. */
  guard(leadership: number): void;
  present(record: ReplicaRecord): boolean;
}

/** Records a new replica's `starting` with its activation's traceparent, in line with later writes. */
export function recordStarting(c: TierWriter, record: ReplicaRecord, traceparent: string): void {
  const leadership = c.leadership;
  record.writes = record.writes
    .then(async () => {
      c.guard(leadership);
      await c.deps.platform.recordTier(c.key, record.replica, {
        tier: "starting",
        since: record.since,
        traceparent,
      });
      c.counts.tierWrites++;
      record.recorded = "starting";
    })
    .catch((error: unknown) => c.log.debug("could not record a start's trace on its replica", { error }));
}

/** Records `event` on the platform after the writes before it; `attempt` counts its tries. */
export function writeTier(
  c: TierWriter,
  record: ReplicaRecord,
  event: ReplicaEvent,
  leadership: number,
  attempt: number,
) {
  const write = record.writes.then(async () => {
    c.guard(leadership);
    await c.deps.platform.recordTier(c.key, record.replica, event, record.recorded);
    c.counts.tierWrites++;
    record.recorded = event.tier;
    if (record.unwritten === event) record.unwritten = undefined;
  });
  record.writes = write.catch((error: unknown) =>
    tierWriteFailed(c, record, event, leadership, attempt, error),
  );
  return write;
}

/**
 * A tier write the platform refused is made again, with back-off, while it is still the last
 * tier told and this leadership lasts. Its caller's operation failed with it, yet the tier
 * stands (the engine did wake or sleep): found by an outside tester, a wake's `ready` refused
 * once (the API server throttling) left the pod `waking` for good, activators holding every
 * request for it until its hold budget ran out while the controller believed it ready.
 */
function tierWriteFailed(
  c: TierWriter,
  record: ReplicaRecord,
  event: ReplicaEvent,
  leadership: number,
  attempt: number,
  error: unknown,
): void {
  if (error instanceof NotLeading || leadership !== c.leadership || record.unwritten !== event) return;
  const delayMs = rewriteDelayMs(attempt); // until it is written or the tier moves on
  c.log.warn("tier write failed; writing it again", {
    replica: record.replica.id,
    tier: event.tier,
    attempt,
    delayMs,
    error,
  });
  c.deps.clock.setTimeout(() => {
    if (leadership !== c.leadership || !c.present(record) || record.unwritten !== event) return;
    void writeTier(c, record, event, leadership, attempt + 1).catch(() => {});
  }, delayMs);
}
