/**
 * Finding out where a replica's engine really is (after a takeover mid-operation, when an
 * activator could not reach it, or the self-heal's periodic check): a dead or frozen one is
 * replaced as a crash, one found asleep is shown so (and woken for the requests it runs), one
 * left waking or draining is finished.
 */
import { skippedWarmUp, wake } from "./replica-activation.ts";
import { goneUnder } from "./replica-engine-calls.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import type { ReplicaRecord } from "./replica-record.ts";

/**
 * Where is the engine really (after a takeover mid-operation, or when an activator could not reach
 * it)? `exitWaitMs`: how long an engine that fails its health check may take to be seen exit.
 */
export async function recheck(
  c: ReplicaOps,
  record: ReplicaRecord,
  healthMs?: number,
  exitWaitMs = 0,
): Promise<void> {
  const leadership = c.leadership;
  const engine = c.deps.platform.engine(record.replica);
  let healthy: boolean;
  try {
    healthy = await engine.healthy(healthMs);
  } catch (error) {
    // Snooze could not ask (out of file descriptors or ports): that says nothing of the engine,
    // which is kept; the next re-check asks again.
    c.log.warn("could not re-check the replica: this process is short of resources", {
      replica: record.replica.id,
      error,
    });
    return;
  }
  if (!healthy) {
    c.guard(leadership);
    // An engine that died under a request is told by its exit, as any exit is: its code and last
    // words, and its crash loop's back-off to the requests held (found by an outside tester: the
    // re-check got there first, "did not answer its health check", and a request held again for
    // it waited out its hold budget, then heard Retry-After: 1 in a back-off of 16 s).
    if (exitWaitMs > 0 && c.present(record)) await c.waiters.settle(() => !c.present(record), exitWaitMs);
    c.guard(leadership);
    if (!c.present(record)) return;
    c.log.warn("replica failed its re-check; replacing it", { replica: record.replica.id });
    c.lastError = `${record.replica.label} did not answer its health check`;
    // Dead or frozen, it failed on its own as a crash does: its replacement backs off in a loop
    // (found by an outside tester: engines that died under a request were replaced at once,
    // again and again, never counted). Requests held hear the back-off when it goes cold.
    if (c.leftOnItsOwn(c.lastError) > 0) record.crashLoop = c.lastError;
    record.leaving = true;
    // Activators route nothing more to it and end what runs on it now (its drain ends at once):
    // a frozen engine would hold those requests until it is killed, a stop grace later.
    if (record.tier === "ready") {
      record.drainEndsAt = c.deps.clock.now();
      record.unresponsive = true;
      await c.setTier(record, "draining");
    }
    await c.stopReplica(record);
    return;
  }
  const sleeping = c.config.sleep ? await engine.isSleeping().catch(() => undefined) : false;
  c.guard(leadership);
  if (sleeping === undefined || !c.present(record)) return;
  if (sleeping) {
    // The engine says at which level it sleeps; an engine that does not say is woken as from
    // level 2 (reload the weights), which is right for both.
    const reported = await engine.sleepLevel().catch(() => undefined);
    c.guard(leadership);
    const level = reported === 1 || reported === 2 ? reported : 2;
    const wasReady = record.tier === "ready";
    if (record.tier !== `asleep-${level}`) await c.setTier(record, `asleep-${level}`);
    // Put to sleep behind Snooze's back (a call to the engine's own port) while it served: the
    // requests in flight wait inside the engine for a wake that no held request would ask for.
    if (wasReady && c.load().inFlight > 0) {
      c.log.warn("a ready engine was found asleep with requests in flight; waking it", {
        replica: record.replica.id,
      });
      await wake(c, record, level);
    }
    return;
  }
  if (record.tier === "waking" || record.tier === "draining") {
    if (c.config.warmup)
      try {
        await engine.warmup(c.config.servedModel ?? c.id, c.config.wakeTimeout);
      } catch (error) {
        c.guard(leadership);
        // One skipped (not made, or refused for a key) is routed without it, as after a wake
        // (warmUp), rather than left waking with no one to finish it.
        if (!skippedWarmUp(c, record, error)) {
          // Failed: stopped, as an engine awake after a wake whose warm-up failed is, and the next
          // request starts a clean one (seen while fixing the warm-up this process could not
          // make: it stayed waking for good, routed nothing, never put to sleep nor stopped).
          const exit = (await goneUnder(c, record, error)) ? record.departed : undefined;
          c.guard(leadership);
          if (!c.present(record)) return;
          c.log.warn("warm-up failed; stopping the engine", { replica: record.replica.id, error });
          c.lastError = `wake of ${c.id} failed: ${exit ?? (error as Error).message}`;
          record.leaving = true;
          await c.stopReplica(record);
          return;
        }
      }
    c.guard(leadership);
    await c.setTier(record, "ready");
  }
}
