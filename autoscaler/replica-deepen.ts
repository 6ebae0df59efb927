/**
 * A level-1 sleeper moved to level 2 (host RAM freed): woken and put to sleep again, taken back
 * half way by a request, or, in a slot, stopped instead. Apart from the drain since it starts from
 * a sleeper and ends, on a request, in a wake.
 */
import { ROOT_CONTEXT } from "@opentelemetry/api";
import { inSpan } from "../lib/tracing.ts";
import { isLocalFailure } from "./engine-client.ts";
import { ActivationStopped } from "./operation-errors.ts";
import { wake } from "./replica-activation.ts";
import { goneUnder, watched } from "./replica-engine-calls.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import { failedOperationCoolMs, type ReplicaRecord } from "./replica-record.ts";

/**
 * Level 1 → 2 frees host RAM. vLLM ignores a sleep while asleep, so the engine is woken (weights
 * back from host RAM, fast) and put to sleep again at level 2. A slot member's accelerator may
 * hold another resident by now: waking is not allowed, so it goes to zero instead.
 */
export async function deepen(c: ReplicaOps, record: ReplicaRecord): Promise<void> {
  const leadership = c.leadership;
  if (c.deps.slot) {
    record.leaving = true;
    await c.stopReplica(record);
    return;
  }
  const engine = c.deps.platform.engine(record.replica);
  const moved = c.deps.clock.now();
  let wanted = false;
  let woken = false;
  try {
    // No request causes a deepening: a trace of its own.
    await inSpan(
      "snooze.deepen",
      { "snooze.model": c.id },
      async (span) => {
        // Watched as any wake: a frozen engine would hold the move until wakeTimeout.
        await watched(c, record, "its wake call", (abandon) => engine.wake(1, c.config.wakeTimeout, abandon));
        woken = true;
        // A request came while the engine moved: it is awake now, so it serves that request
        // rather than sleep at level 2 and be woken from there (a wake's time more). One whose
        // client has gone since counts too, as a held request's activation goes on without it.
        // So does a prewarm under way (found by a probe: one asked during the move had the
        // engine sleep at level 2, then reload its weights from disk for the prewarm's wake).
        wanted = c.load().held > 0 || c.lastActive > moved || c.prewarmWake || c.learner.prewarming;
        span.setAttribute("snooze.deepen.taken_back", wanted);
        if (!wanted)
          await watched(c, record, "its sleep call", (abandon) => engine.sleep(2, "wait", 30_000, abandon));
      },
      ROOT_CONTEXT,
    );
  } catch (error) {
    c.guard(leadership);
    if (error instanceof ActivationStopped) {
      // A person's stop gave it up (see stopUnwanted): stopped as asked, not a failed move.
      c.log.info("deeper sleep given up: the model was stopped", { replica: record.replica.id });
      record.leaving = true;
      if (c.present(record)) await c.stopReplica(record);
      return;
    }
    if (isLocalFailure(error) && c.present(record)) {
      await deepenUnasked(c, record, woken, error, moved);
      return;
    }
    const exit = (await goneUnder(c, record, error)) ? record.departed : undefined;
    c.guard(leadership);
    c.log.warn("deeper sleep failed; stopping the engine", { replica: record.replica.id, error, exit });
    c.lastError = exit
      ? `deeper sleep of ${c.id} failed: ${exit}`
      : `deeper sleep of ${c.id} failed, so its engine was stopped: ${(error as Error).message}`;
    record.leaving = true;
    await c.stopReplica(record);
    return;
  }
  c.guard(leadership);
  if (!c.present(record)) return;
  // The held requests have waited since the move began: the activation counts from there.
  if (wanted) await wake(c, record, 1, { awake: true, since: moved });
  else await c.setTier(record, "asleep-2");
}

/**
 * A deeper sleep whose call this process could not make (out of file descriptors or memory): the
 * engine did not get it, and is not stopped for Snooze's own shortage. Before the wake it sleeps
 * at level 1 as it did: the move is asked again after the cool-down (by the ladder, or by the
 * host-memory budget that asked for it). After the wake, its level-2 sleep not asked, it is
 * awake: the replica is ready again (routable, not shown asleep), and sleeps again as any idle
 * ready replica does, at sleepAfter, then deeper at deepSleepAfter. It is shown waking from the
 * move's start (`moved`), then ready, as a move taken back half way is (a `woke` event), but not
 * warmed up: that is one more call, of a process short of descriptors, for no request.
 */
async function deepenUnasked(
  c: ReplicaOps,
  record: ReplicaRecord,
  woken: boolean,
  error: unknown,
  moved: number,
): Promise<void> {
  record.coolUntil = c.deps.clock.now() + failedOperationCoolMs;
  if (!woken) {
    c.log.warn("deeper sleep could not be asked; the engine sleeps on at level 1 and is asked again", {
      replica: record.replica.id,
      error,
    });
    record.budgetAgain = true;
    return;
  }
  c.log.warn("level-2 sleep could not be asked; the engine, woken for it, is ready again", {
    replica: record.replica.id,
    error,
  });
  await c.setTier(record, "waking", { since: moved });
  await c.setTier(record, "ready");
}
