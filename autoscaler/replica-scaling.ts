/**
 * The model's replica count on the platform: a scale-up that begins one activation per new
 * replica (a start the platform could not even begin failing as one), a scale-down that names the
 * replicas to go, and a named replica the workload spared made free again. The only calls to
 * `Platform.scale`; the count asked for overrides the platform's while its cache catches up. A
 * scale refused for a conflict is decided again at once; one that failed otherwise (an API server
 * that errs, a permission missing) only after a back-off, during which no scale is made.
 */
import { context, ROOT_CONTEXT, SpanStatusCode } from "@opentelemetry/api";
import { formatDuration } from "../lib/duration.ts";
import type { Logger } from "../lib/log.ts";
import type { Tier } from "../lib/replica-event.ts";
import type { RewriteBackoff } from "../lib/rewrite-backoff.ts";
import type { ModelControllerDeps } from "./model-controller-api.ts";
import { NotLeading } from "./operation-errors.ts";
import { type ReplicaSetView, StartFailed, WriteConflict } from "./platform.ts";
import type { Activation, ReplicaRecord } from "./replica-record.ts";

/** How long the platform's count may lag a scale we asked for (a cache catching up) before it wins again. */
const scaleLagMs = 10_000;

/** What scaling needs of a model's controller. */
export interface ScalingHost {
  readonly id: string;
  readonly key: string;
  readonly log: Logger;
  readonly deps: Pick<ModelControllerDeps, "platform" | "clock">;
  readonly counts: { scales: number };
  readonly leadership: number;
  readonly isLeading: boolean;
  readonly records: ReadonlyMap<string, ReplicaRecord>;
  /** A scale is under way: no second one starts. */
  scaling: boolean;
  /** The back-off after a scale that failed (not refused for a conflict): no scale until it is over. */
  readonly scaleRetry: RewriteBackoff;
  /** The count asked for, which wins over the platform's until `until` (or while scaling). */
  scaleOverride?: { replicas: number; until: number };
  /** Starts asked for whose replica has not appeared yet, oldest first. */
  readonly pendingStarts: Activation[];
  guard(leadership: number): void;
  present(record: ReplicaRecord): boolean;
  workloadReplicas(): number;
  /** Something changed: the controller looks again. */
  changed(): void;
  beginActivation(kind: "start" | "wake", from: Tier, started?: number): Activation;
  activationFailed(record: ReplicaRecord, reason: string, backTo?: Tier): void;
  /** Tells activators the record's state as it is now (its tier unchanged). */
  emitFor(record: ReplicaRecord): void;
}

export function scaleUp(c: ScalingHost, to: number): void {
  // Its retry calls for a pass once the back-off is over.
  if (c.scaleRetry.retryAt !== undefined) return;
  const leadership = c.leadership;
  c.guard(leadership);
  const from = c.workloadReplicas();
  c.scaling = true;
  // Counted as pending at once, so the next pass (and the slot) sees the start under way.
  c.scaleOverride = { replicas: to, until: c.deps.clock.now() + scaleLagMs };
  const activations = Array.from({ length: to - from }, () => c.beginActivation("start", "cold"));
  c.pendingStarts.push(...activations);
  // One start: the platform's lines about it carry its trace ids (tracing.md: logs join the traces).
  const startTrace = activations.length === 1 ? activations[0]!.context : ROOT_CONTEXT;
  context.with(startTrace, () => c.log.info("starting", { from, to }));
  void context
    .with(startTrace, () => c.deps.platform.scale(c.key, from, to, []))
    .then(() => {
      c.counts.scales++;
      c.scaleRetry.succeeded();
    })
    .catch((error: unknown) => {
      c.scaleOverride = undefined;
      const unused = activations.filter((activation) => c.pendingStarts.includes(activation));
      for (const activation of unused) c.pendingStarts.splice(c.pendingStarts.indexOf(activation), 1);
      // An engine the platform could not even begin failed its start, as one that exits at once
      // does: held requests hear why, lastError says it, and the starts back off (found by an
      // outside tester: they were held for their whole budget, and `snooze wake` for its timeout).
      const notBegun = error instanceof StartFailed && leadership === c.leadership && c.isLeading;
      const failed = notBegun ? unused.shift() : undefined;
      for (const activation of unused) {
        activation.startSpan?.end();
        activation.span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
        activation.span.end();
      }
      if (notBegun) startNotBegun(c, error, failed);
      else if (leadership === c.leadership) failedScale(c, "scale-up", error);
    })
    .finally(() => {
      c.scaling = false;
      if (leadership === c.leadership) c.changed();
    });
}

/**
 * A scale-down names the replicas to remove, but a ReplicaSet chooses among pods of equal
 * deletion cost as it likes (two marked by scale-downs in quick succession), so another may go
 * in a named one's place. Once the workload holds its new count (its scale moved, no pod left
 * to remove), a named replica still here is free again, or it would stay busy for ever: never
 * stopped, never woken.
 */
export function releaseSpared(c: ScalingHost, set: ReplicaSetView): void {
  if (c.scaling) return;
  for (const record of c.records.values()) {
    const from = record.removedFrom;
    if (from === undefined || set.scale === from || set.replicas.length !== set.scale) continue;
    record.removedFrom = undefined;
    record.busy = false;
    record.leaving = false;
    record.stoppedIn = undefined;
    if (record.goneBy !== undefined) {
      record.goneBy = undefined;
      c.emitFor(record);
    }
    c.log.warn("the workload removed another replica in place of this one; deciding again", {
      replica: record.replica.id,
    });
  }
}

/** Scales down, removing these replicas first. Resolves when the platform took the new count. */
export async function removeReplicas(c: ScalingHost, wanted: ReplicaRecord[], to: number): Promise<void> {
  const leadership = c.leadership;
  // A replica that left meanwhile must not be named: the platform would remove another in its place.
  const records = wanted.filter((r) => c.present(r));
  if (records.length === 0) return;
  const heldUntil = c.scaleRetry.retryAt;
  if (heldUntil !== undefined) {
    // A scale failed a moment ago: these wait for its back-off, looking busy meanwhile, so that no
    // pass decides their release again and again before it is over.
    for (const r of records) r.coolUntil = Math.max(r.coolUntil, heldUntil);
    return;
  }
  to = Math.max(to, c.workloadReplicas() - records.length);
  c.scaling = true;
  for (const r of records) {
    r.busy = true;
    r.leaving = true;
    r.stoppedIn = context.active();
  }
  const from = c.workloadReplicas();
  try {
    c.guard(leadership);
    c.log.info("stopping", { from, to, replicas: records.map((r) => r.replica.id) });
    // Activators tell a request they hold meanwhile when the engine is gone at the latest and the
    // model can start again (found by an outside tester: a wake's time, 2 s, while an engine
    // deaf to SIGTERM had most of its stop grace left).
    const within = c.deps.platform.stopWithinMs;
    if (within !== undefined) {
      const goneBy = c.deps.clock.now() + within;
      for (const r of records) {
        r.goneBy = goneBy;
        c.emitFor(r);
      }
    }
    c.scaleOverride = { replicas: to, until: c.deps.clock.now() + scaleLagMs };
    await c.deps.platform.scale(
      c.key,
      from,
      to,
      records.map((r) => r.replica),
    );
    for (const r of records) r.removedFrom = from;
    c.counts.scales++;
    c.scaleRetry.succeeded();
  } catch (error) {
    c.scaleOverride = undefined;
    for (const r of records) {
      r.busy = false;
      r.leaving = false;
      r.stoppedIn = undefined;
      if (r.goneBy !== undefined) {
        r.goneBy = undefined;
        c.emitFor(r);
      }
    }
    if (!(error instanceof NotLeading) && leadership === c.leadership) {
      failedScale(c, "scale-down", error);
      const heldUntil = c.scaleRetry.retryAt;
      if (heldUntil !== undefined) for (const r of records) r.coolUntil = Math.max(r.coolUntil, heldUntil);
    }
  } finally {
    c.scaling = false;
    if (leadership === c.leadership) c.changed();
  }
}

/**
 * A scale that did not go through. Refused for a conflict (the count moved, the workload is gone):
 * decided again at once, from what is there now. Failed otherwise: decided again once the back-off
 * is over, 1 s doubling to 30 s (found by an outside tester: decided again at once, a scale that
 * kept failing was retried as fast as the platform answered, and out of file descriptors that
 * starved the event loop).
 */
function failedScale(c: ScalingHost, what: "scale-up" | "scale-down", error: unknown): void {
  if (error instanceof WriteConflict) {
    c.log.info(`${what} refused; deciding again`, { reason: error.message });
    return;
  }
  const retryInMs = c.scaleRetry.failed(() => c.changed());
  c.log.warn(`${what} failed; trying again in ${formatDuration(retryInMs)}`, { error, retryInMs });
}

/** A start whose engine the platform could not begin: a failed activation of a replica that never was. */
export function startNotBegun(c: ScalingHost, error: StartFailed, activation: Activation | undefined): void {
  const now = c.deps.clock.now();
  const record: ReplicaRecord = {
    replica: {
      id: error.replica,
      label: `engine ${error.replica}`,
      uid: error.replica,
      up: false,
      createdAt: now,
      restarts: 0,
      node: "",
    },
    tier: "cold",
    since: now,
    asleepSince: now,
    busy: false,
    leaving: false,
    coolUntil: 0,
    restarts: 0,
    writes: Promise.resolve(),
    ...(activation ? { activation } : {}),
  };
  c.activationFailed(record, `start of ${c.id} failed: ${error.message}`);
}
