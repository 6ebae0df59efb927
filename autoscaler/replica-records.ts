/**
 * The controller's records brought in line with the platform's replica set: a replica seen for the
 * first time adopted (new, or left by a previous leader mid-operation), an engine restarted in
 * place shown starting again, and a replica gone forgotten, told as what it was (a stop asked for,
 * a failed activation, a crash counted in its loop). Apart from the pass, which calls it first.
 */
import { context } from "@opentelemetry/api";
import { traceparentOf } from "../lib/tracing.ts";
import { endActivation, inActivation } from "./activation-trace.ts";
import type { ModelControllerDeps } from "./model-controller-api.ts";
import type { Replica } from "./platform.ts";
import type { ActionHost } from "./replica-actions.ts";
import { recheck } from "./replica-recheck.ts";
import type { ReplicaRecord } from "./replica-record.ts";
import { recordStarting, type TierWriter } from "./tier-writes.ts";

/** What keeping the records needs of a model's controller. */
export type RecordsHost = ActionHost &
  TierWriter & {
    readonly records: Map<string, ReplicaRecord>;
    readonly deps: Pick<ModelControllerDeps, "metrics" | "levelOneChanged" | "statusChanged" | "slot">;
    /** Why replicas left on their own, as the platform said, until the records notice. */
    readonly departures: Map<string, string>;
    /** When the model last had no replica: what its `cold` tier is dated from. */
    coldSince: number;
    /** Replicas awake and asleep from now on, for the model's GPU-seconds. */
    accountTiers(): void;
    /** Tells activators and CloudEvents where the replica is now. */
    emitFor(record: ReplicaRecord, estimateMs?: number, error?: string, exit?: string): void;
  };

/** Brings the records in line with the platform: new replicas start, gone ones are forgotten. */
export function syncRecords(c: RecordsHost): void {
  const now = c.deps.clock.now();
  const seen = new Set<string>();
  for (const replica of c.deps.platform.replicaSet(c.key)?.replicas ?? []) {
    seen.add(replica.id);
    let record = c.records.get(replica.id);
    if (record && record.replica.uid !== replica.uid) {
      forget(c, record);
      record = undefined;
    }
    if (!record) {
      record = adopt(c, replica);
      continue;
    }
    record.replica = replica;
    if (replica.restarts > record.restarts && !record.busy) {
      // The engine restarted in place: it comes back awake and loading, whatever it was before.
      c.log.warn("engine restarted", { replica: replica.id, restarts: replica.restarts });
      const from = record.tier;
      record.tier = "starting";
      record.since = now;
      // A tier change as any other: counted, and its line (the `starting → ready` that ends it
      // is counted too; without this one the counts into and out of `starting` disagreed).
      if (from !== "starting") {
        c.deps.metrics.transition(c.id, from, "starting");
        c.log.info("tier", { replica: replica.id, from, to: "starting", why: "engine restarted" });
      }
      record.startFailed = undefined;
      c.accountTiers();
      c.emitFor(record);
    }
    record.restarts = replica.restarts;
  }
  for (const record of [...c.records.values()]) if (!seen.has(record.replica.id)) forget(c, record);
}

/** A replica the controller sees for the first time: new, or left by a previous leader. */
function adopt(c: RecordsHost, replica: Replica): ReplicaRecord {
  const recorded = replica.recorded?.tier;
  const since = replica.recorded?.since ?? replica.createdAt;
  const record: ReplicaRecord = {
    replica,
    tier: recorded ?? "starting",
    since,
    asleepSince: since,
    recorded,
    busy: false,
    leaving: false,
    coolUntil: 0,
    restarts: replica.restarts,
    writes: Promise.resolve(),
  };
  c.records.set(replica.id, record);
  c.accountTiers();
  if (record.tier === "starting")
    record.activation = c.pendingStarts.shift() ?? c.beginActivation("start", "cold", replica.createdAt);
  if (recorded === undefined) {
    c.deps.metrics.transition(c.id, "cold", "starting");
    inActivation(record, () => c.log.info("tier", { replica: replica.id, from: "cold", to: "starting" }));
  }
  if (record.activation) {
    c.emitFor(record, c.estimate("start"));
    // Activators in other processes see the pod, not this event: a traced start goes on the pod
    // too, so they link the requests they hold to it. Untraced, there is nothing to write.
    const traceparent = traceparentOf(record.activation.span);
    if (recorded === undefined && traceparent) recordStarting(c, record, traceparent);
  } else c.emitFor(record);
  // Left mid-operation by a previous leader: find out where the engine really is.
  if (recorded === "waking" || recorded === "draining")
    c.operate(record, "recheck", () => recheck(c, record));
  return record;
}

/** A replica is gone: asked to (a stop), or on its own (a crash, a deleted pod). */
function forget(c: RecordsHost, record: ReplicaRecord): void {
  c.records.delete(record.replica.id);
  // The platform's words when it saw the replica leave on its own (an engine's exit), if it did.
  const departed = c.departures.get(record.replica.id);
  const reason = departed ?? `${record.replica.label} is gone`;
  c.departures.delete(record.replica.id);
  record.departed = departed;
  const wasLevelOne = record.tier === "asleep-1";
  const from = record.tier;
  record.tier = "cold";
  record.since = c.deps.clock.now();
  if (c.records.size === 0) c.coldSince = record.since;
  c.accountTiers();
  // Gone during its start or wake, or after an operation stopped it: the line is that one's.
  const within = record.activation?.context ?? record.stoppedIn;
  const toCold = () => {
    if (from === "cold") return;
    c.deps.metrics.transition(c.id, from, "cold");
    const line = () => c.log.info("tier", { replica: record.replica.id, from, to: "cold" });
    if (within) context.with(within, line);
    else line();
  };
  // A crash loop is told as a failed activation is (lastError, retryAt; held requests hear why,
  // and one that arrives in the back-off is answered at once when it leaves it no time), rather
  // than hidden while every request waits out its hold budget (found by an outside tester).
  let crashLoop: string | undefined;
  if (!record.leaving) {
    // A sleeper gone before its wake reached it (not called yet, or refused) died asleep: a crash.
    const wakeFailed = from === "waking" && record.wakeCalled !== false && !record.diedAsleep;
    if (from === "starting" || wakeFailed) {
      // The activation failed: counted once, as a failure (not also as a crash). The replica
      // went cold all the same (the tier gauge stayed `starting` for ever without this).
      toCold();
      c.activationFailed(record, `${from === "starting" ? "start" : "wake"} of ${c.id} failed: ${reason}`);
      afterForget(c, wasLevelOne);
      return;
    }
    c.log.warn("replica left on its own", { replica: record.replica.id, reason });
    if (c.leftOnItsOwn(reason) > 0) crashLoop = c.lastError;
  }
  endActivation(c, record, "stopped");
  toCold();
  // How it went goes to activators too: a request its engine died under is told (with `exit`).
  c.emitFor(record, undefined, crashLoop ?? record.crashLoop, record.leaving ? undefined : departed);
  afterForget(c, wasLevelOne);
}

function afterForget(c: RecordsHost, wasLevelOne: boolean): void {
  if (wasLevelOne) c.deps.levelOneChanged?.();
  c.deps.statusChanged?.();
  c.deps.slot?.changed();
}
