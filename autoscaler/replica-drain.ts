/**
 * Releasing an awake replica: activators see `draining`, the engine empties (bounded by
 * drainTimeout, and never while an activator may still route to it), then it sleeps (mode=wait)
 * or is stopped. A request back before the sleep is sent takes it back; a sleep that fails stops
 * the engine. Its own module: the longest operation, and the one a slot's swap waits on.
 */
import { context, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { sleepTimeoutMs } from "../lib/replica-event.ts";
import { inSpan, tracer } from "../lib/tracing.ts";
import { isLocalFailure } from "./engine-client.ts";
import { ActivationStopped } from "./operation-errors.ts";
import type { Platform } from "./platform.ts";
import { goneUnder, watched } from "./replica-engine-calls.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import { failedOperationCoolMs, type ReplicaRecord } from "./replica-record.ts";

/** How often a drain asks the engine whether it still runs or queues anything. */
const drainPollMs = 100;

/**
 * Stop routing (activators see `draining`), give them a moment to see it, wait until the engine
 * has nothing running or queued and no activator has a request in flight to it (bounded by
 * drainTimeout), then sleep with mode=wait (or stop). A request that comes back before the sleep
 * begins takes the replica back.
 */
export async function drainThen(c: ReplicaOps, record: ReplicaRecord, next: 1 | 2 | "stop"): Promise<void> {
  const leadership = c.leadership;
  // A swap's drain and sleep are the swap's; any other release (idle, a person's sleep or stop, a
  // scale-in) is a trace of its own, the drain's span its root and the sleep its child.
  const swap = c.parent;
  // A slot member yielding in a swap (capped to 0) drains within the slot's drainTimeout too: a
  // swap waits no longer. Any other drain (idle, a person's sleep or stop) keeps the model's own.
  const drainTimeout =
    c.deps.slot && c.cap === 0
      ? Math.min(c.config.drainTimeout, c.deps.slot.config.drainTimeout)
      : c.config.drainTimeout;
  const started = c.deps.clock.now();
  const deadline = started + drainTimeout;
  // Activators end the requests still running at the deadline: the sleep (mode=wait) then only
  // waits for the engine to see them go, not for a stream that would run for minutes.
  record.drainEndsAt = deadline;
  const drainSpan = tracer.startSpan(
    "snooze.drain",
    { root: swap === undefined, attributes: { "snooze.model": c.id } },
    swap ?? ROOT_CONTEXT,
  );
  const parent = swap ?? trace.setSpan(ROOT_CONTEXT, drainSpan);
  // Its log lines carry the drain's trace ids (tracing.md: logs join the traces).
  return context.with(trace.setSpan(swap ?? ROOT_CONTEXT, drainSpan), async () => {
    await c.setTier(record, "draining");
    const engine = c.deps.platform.engine(record.replica);
    let idle = false;
    try {
      // The grace is a fixed time for activators to see the drain: a stats report does not end it.
      const graceEnd = started + c.deps.drainGraceMs;
      while (record.tier === "draining" && c.deps.clock.now() < graceEnd)
        await c.waiters.pause(graceEnd - c.deps.clock.now());
      while (record.tier === "draining" && c.deps.clock.now() < deadline) {
        c.guard(leadership);
        if (await engineIdle(c, record, engine, started)) {
          idle = true;
          break;
        }
        await c.waiters.pause(Math.min(drainPollMs, deadline - c.deps.clock.now()));
      }
    } finally {
      drainSpan.setAttribute("snooze.drain.timed_out", !idle);
      drainSpan.end();
    }
    const drained = c.deps.clock.now();
    c.lastRelease = { drainMs: drained - started, sleepMs: 0 };
    c.guard(leadership);
    if (record.tier !== "draining" || !c.present(record)) return; // taken back by demand, or gone
    const lagging = c.loads.routedBy(record.replica.id, started, c.deps.clock.now());
    if (lagging !== undefined) {
      // Asleep, it would hang whatever that activator still sends it: it stays awake, and its
      // idle time starts again.
      c.log.warn("an activator still routes to the replica at the drain's end; it stays awake", {
        replica: record.replica.id,
        activator: lagging,
      });
      record.coolUntil = c.deps.clock.now() + failedOperationCoolMs;
      c.lastActive = c.deps.clock.now();
      await c.setTier(record, "ready");
      return;
    }
    // From here on the engine is going down; requests arriving now wait for the next wake.
    record.leaving = true;
    record.restarting = false;
    c.releaseSentAt = c.deps.clock.now();
    // Its settings changed since the drain began (a reload): it is replaced, so it is stopped, not
    // sent a sleep call first that would move its weights out (to host RAM, within its budget)
    // for an engine stopped right after (found by a probe: a `snooze sleep` drain, then a reload).
    if (next === "stop" || record.replica.outdated === true) {
      await c.stopReplica(record);
      return;
    }
    c.sleepsUnderWay++;
    try {
      await inSpan(
        "snooze.sleep",
        { "snooze.model": c.id, "snooze.sleep_level": next },
        // The requests still running were ended at the drain's end: what is left is the engine
        // moving its weights out, which a wake moves back, so it has a wake's time, unless it
        // stops answering its health check meanwhile (frozen: see engine-call-watch.ts).
        () =>
          watched(c, record, "its sleep call", (abandon) =>
            engine.sleep(next, "wait", sleepTimeoutMs(c.config.wakeTimeout), abandon),
          ),
        parent,
      ).finally(() => c.sleepsUnderWay--);
    } catch (error) {
      c.guard(leadership);
      if (error instanceof ActivationStopped) {
        // A person's stop gave it up: the engine, half asleep, is stopped now, as it was asked;
        // not a failed sleep (no lastError, nothing said to the sleep's asker but the stop).
        c.log.info("sleep given up: the model was stopped", { replica: record.replica.id });
        if (c.present(record)) await c.stopReplica(record);
        return;
      }
      if (isLocalFailure(error) && c.present(record) && record.tier === "draining") {
        // The call never left this process (out of file descriptors or memory): the engine did
        // not get it and is as it was, awake and drained. It is taken back, and its sleep asked
        // again after the cool-down, rather than a healthy engine stopped for Snooze's own
        // shortage (found by an outside tester: the self-heal's checks did the same).
        c.log.warn("sleep could not be asked; the engine stays awake and is asked again", {
          replica: record.replica.id,
          error,
        });
        record.leaving = false;
        record.coolUntil = c.deps.clock.now() + failedOperationCoolMs;
        await c.setTier(record, "ready");
        return;
      }
      // An engine that died under its sleep call: its exit says why, not the cut connection.
      const exit = (await goneUnder(c, record, error)) ? record.departed : undefined;
      c.guard(leadership);
      const reason = exit ?? (error as Error).message;
      // An engine in an unknown state would hang the next request: stop it instead.
      c.log.warn("sleep failed; stopping the engine", { replica: record.replica.id, error, exit });
      c.sleepFailure = { at: c.deps.clock.now(), reason };
      // `snooze status` says why the model went cold.
      c.lastError = exit
        ? `sleep of ${c.id} failed: ${exit}`
        : `sleep of ${c.id} failed, so its engine was stopped: ${reason}`;
      await c.stopReplica(record);
      return;
    }
    c.lastRelease.sleepMs = c.deps.clock.now() - drained;
    c.learner.measured(next === 1 ? "sleep1" : "sleep2", c.lastRelease.sleepMs);
    c.guard(leadership);
    if (!c.present(record)) return; // gone while it fell asleep: its cold event was the last word
    record.leaving = false;
    await c.setTier(record, next === 1 ? "asleep-1" : "asleep-2");
  });
}

/** Drained: the engine runs and queues nothing, and no activator has a request in flight to it. */
async function engineIdle(
  c: ReplicaOps,
  record: ReplicaRecord,
  engine: ReturnType<Platform["engine"]>,
  since: number,
): Promise<boolean> {
  if (c.loads.routedBy(record.replica.id, since, c.deps.clock.now()) !== undefined) return false;
  const others = [...c.records.values()].some((r) => r !== record && r.tier === "ready");
  // With other ready replicas the model's in-flight count is theirs too; the drain grace covers ours.
  if (!others && c.load().inFlight > 0) return false;
  const load = await engine.load(1_000).catch(() => ({ running: 0, waiting: 0 }));
  return load.running + load.waiting === 0;
}
