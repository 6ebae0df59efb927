/**
 * A pass's decisions carried out on the replicas: each action of `decideReplicas` started as its
 * operation (or scale), a person's stop or sleep applied to what is under way, and replicas whose
 * engine settings changed replaced. The controller decides and owns the records; this turns a
 * decision into operations, each on its own lifetime (`operate`).
 */
import { formatDuration } from "../lib/duration.ts";
import { isAsleep } from "../lib/replica-event.ts";
import { inActivation } from "./activation-trace.ts";
import { progressDeadlineMargin, type ReplicaAction } from "./horizontal.ts";
import { ActivationStopped, SleepInstead } from "./operation-errors.ts";
import { finishStart, wake } from "./replica-activation.ts";
import { deepen } from "./replica-deepen.ts";
import { drainThen } from "./replica-drain.ts";
import { abandonCalls } from "./replica-engine-calls.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import type { ReplicaRecord } from "./replica-record.ts";
import { removeReplicas, type ScalingHost, scaleUp } from "./replica-scaling.ts";

/** What carrying out a pass needs of a model's controller. */
export type ActionHost = ReplicaOps &
  ScalingHost & {
    /** Runs `operation` on `record` on its own lifetime: the record is busy until it ends. */
    operate(record: ReplicaRecord, what: string, operation: () => Promise<void>): void;
  };

/** `keepFor`: how long a pod whose start failed is kept (`keepFailedStarts`); undefined: not kept. */
export function act(c: ActionHost, action: ReplicaAction, scalable: boolean, keepFor?: number): void {
  if (action.kind === "scale-up" || action.kind === "stop") {
    if (c.scaling || !scalable) return;
    if (action.kind === "scale-up") scaleUp(c, action.to);
    else
      void removeReplicas(
        c,
        action.pods.map((p) => c.records.get(p)).filter((r): r is ReplicaRecord => r !== undefined),
        action.to,
      );
    return;
  }
  const record = c.records.get(action.pod);
  if (!record) return;
  switch (action.kind) {
    case "finish-start":
      // A start that failed while its pod was kept, and that came up after all, goes on.
      record.startFailed = undefined;
      c.operate(record, "finish-start", () => inActivation(record, () => finishStart(c, record)));
      return;
    case "wake":
      c.operate(record, "wake", () => wake(c, record, action.level));
      return;
    case "undrain":
      if (record.tier === "draining" && !record.leaving) void c.setTier(record, "ready").catch(() => {});
      return;
    case "drain-and-sleep":
      c.operate(record, "sleep", () => drainThen(c, record, action.level));
      return;
    case "drain-and-stop":
      c.operate(record, "stop", () => drainThen(c, record, "stop"));
      return;
    case "deepen":
      c.operate(record, "deepen", () => deepen(c, record));
      return;
    case "start-failed":
      // The stop is the failed start's: its lines carry the activation's trace ids. One the
      // platform says cannot come up (an image it cannot pull, an engine that keeps exiting) is
      // told at once with the platform's reason, rather than after startTimeout with none.
      inActivation(record, () => {
        // A kept pod failed again sooner than startTimeout: at Knative's progress deadline.
        const age = c.deps.clock.now() - record.since;
        const limit =
          keepFor !== undefined && keepFor < c.config.startTimeout && age >= keepFor
            ? `the revision's progress deadline and ${formatDuration(progressDeadlineMargin)} (${formatDuration(keepFor)})`
            : `startTimeout (${formatDuration(c.config.startTimeout)})`;
        // What a hung engine printed last says where it stuck (a reason it printed and then
        // waited on, found by a probe): the timeout alone sent its user to `snooze logs`.
        const output = c.deps.platform.lastOutput?.(c.key, record.replica.id);
        c.activationFailed(
          record,
          action.reason !== undefined
            ? `start of ${c.id} failed: ${record.replica.label} cannot start: ${action.reason}`
            : `start of ${c.id} failed: ${record.replica.label} not ready within ${limit}${output ? `; its last output: ${output}` : ""}`,
        );
        // A pod kept (keepFailedStarts: a Knative revision's before its initial scale) stays
        // until its startTimeout, or sooner past Knative's progress deadline (keptFor): the
        // kubelet may yet start it, and Knative judges the revision.
        const kept = keepFor !== undefined && age < keepFor;
        const removes = scalable && !kept && !c.scaling;
        if (removes) void c.stopReplica(record);
        // Failed for good (see ReplicaView.startFailed), unless its removal waits for the scale
        // under way: then the next pass fails it again and removes it.
        record.startFailed = removes || !scalable || kept;
      });
      return;
  }
}

/**
 * A stop asked for by a person takes the sleepers too, once nothing is busy, and a start that no
 * request waits for: an engine that takes minutes to load is not loaded only to be stopped.
 */
export function stopUnwanted(c: ActionHost, scalable: boolean): void {
  // One that is up and finishing its start (its warm-up, or the wake of an engine that came up
  // asleep) is given up there: its operation ends at once, and the next pass stops it as one
  // still loading (an engine whose first inference takes a minute, or that froze, would
  // otherwise hold the stop until startTimeout). One waking is given up too, and its operation
  // stops it (a wake's time, or a frozen engine's two missed checks, would hold the stop). So is
  // one drained and in its sleep call, and a sleeper moving to level 2 (its wake or its sleep
  // call): an engine whose call hangs while it answers /health would hold the stop, and a slot's
  // next member, for the call's timeout (a wake's time, at least 30 s).
  for (const r of c.records.values()) {
    if (r.tier === "starting" && r.busy) abandonCalls(r, new ActivationStopped("the start was stopped"));
    if (r.tier === "waking" && r.busy) abandonCalls(r, new ActivationStopped("the wake was stopped"));
    if (r.tier === "draining" && r.leaving && r.busy)
      abandonCalls(r, new ActivationStopped("the sleep was stopped"));
    if (isAsleep(r.tier) && r.busy) abandonCalls(r, new ActivationStopped("the deeper sleep was stopped"));
  }
  const unwanted = [...c.records.values()].filter(
    (r) => (isAsleep(r.tier) || r.tier === "starting") && !r.busy,
  );
  if (unwanted.length === 0 || c.scaling || !scalable) return;
  if ([...c.records.values()].some((r) => r.busy || r.tier === "draining")) return;
  void removeReplicas(c, unwanted, Math.max(0, c.workloadReplicas() - unwanted.length));
}

/**
 * A sleep asked for by a person gives up the warm-up of a start or wake that no request waits
 * for: the engine, loaded or awake, sleeps at once (`SleepInstead`). The engine's load or its
 * wake call is not given up: an engine must be loaded to sleep, and one half woken is in no known
 * state; the warm-up is skipped after it.
 */
export function sleepUnwanted(c: ActionHost, level: 1 | 2): void {
  for (const r of c.records.values())
    if ((r.tier === "starting" || r.tier === "waking") && r.warmUpCall) {
      r.warmUpCall.abort(new SleepInstead(level));
      r.warmUpCall = undefined;
    }
}

/**
 * Replicas the platform marked outdated (their engine settings changed) leave, whatever the load:
 * an awake one drains first (no request comes back to it; in-flight ones finish, or are ended at
 * drainTimeout) and is stopped; a sleeping or still starting one is stopped at once. Requests
 * meanwhile are held, and the start they ask for runs the new settings. Each leaver is busy before
 * the decision below, so nothing else acts on it.
 */
export function replaceOutdated(c: ActionHost, scalable: boolean): void {
  if (!scalable) return;
  for (const record of c.records.values()) {
    if (record.restarting && !record.replica.outdated && record.tier === "draining") {
      // Found by a probe: a reload that undid the one before (a command saved by mistake, then
      // restored) still restarted the engine that ran it, its requests held through its drain
      // and a cold start. Its drain ends here (drainThen sees it taken back).
      record.restarting = false;
      record.leaving = false;
      c.log.info("engine settings as the engine runs them again: it stays", {
        replica: record.replica.id,
      });
      void c.setTier(record, "ready").catch(() => {});
      continue;
    }
    if (!record.replica.outdated || record.busy || record.leaving) continue;
    if (record.tier === "ready" || record.tier === "draining") {
      record.leaving = true;
      record.restarting = true;
      c.log.info("engine settings changed: draining, then restarting", { replica: record.replica.id });
      c.operate(record, "restart", () => drainThen(c, record, "stop"));
    } else if (!c.scaling) {
      c.log.info("engine settings changed: stopping it", {
        replica: record.replica.id,
        tier: record.tier,
      });
      void c.stopReplica(record);
    }
  }
}
