/**
 * Bringing a replica to `ready`: a start finished (health, an engine up asleep woken, warm-up) and a
 * sleeper woken, each traced as its activation and measured; a warm-up a person's sleep gives up
 * ends in a sleep instead, and a sleeper found dead at its wake is a crash, not a failed wake. One
 * file for both since they share the warm-up and its outcomes.
 */
import { context } from "@opentelemetry/api";
import { formatDuration } from "../lib/duration.ts";
import { inSpan } from "../lib/tracing.ts";
import { endActivation, inActivation } from "./activation-trace.ts";
import { EngineFrozen } from "./engine-call-watch.ts";
import { isLocalFailure, isRefused, isReset, isUnauthorized } from "./engine-client.ts";
import { ActivationStopped, EngineNotUp, NoAnswer, SleepInstead } from "./operation-errors.ts";
import type { Engine, Replica } from "./platform.ts";
import { drainThen } from "./replica-drain.ts";
import { exitNoticeMs, goneUnder, watched } from "./replica-engine-calls.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import type { Activation, ReplicaRecord } from "./replica-record.ts";

/** How recent the platform's own /health answer must be to finish a start without asking again. */
const answeredFreshMs = 1_000;

/** The replica is up (process answers, pod Ready): make sure it is awake, warm it up, route to it. */
export async function finishStart(c: ReplicaOps, record: ReplicaRecord): Promise<void> {
  const leadership = c.leadership;
  record.activation ??= c.beginActivation("start", "cold", record.replica.createdAt);
  const activation = record.activation;
  activation.startSpan?.end();
  activation.startSpan = undefined;
  const engine = c.deps.platform.engine(record.replica);
  // The whole start is bounded by startTimeout, its warm-up included: a first inference slower
  // than wakeTimeout must not fail a start that is still within its time.
  const until = activation.started + c.config.startTimeout;
  let sleepInstead: 1 | 2 | undefined;
  try {
    // Both questions at once: the held requests wait for the answers (a round trip each to an
    // engine that has just started, whose first answers are slow). Not asked when the platform
    // has just heard the engine, a process it started awake, answer /health.
    const [healthy, sleeping] = justAnswered(c, record.replica)
      ? [true, false]
      : await Promise.all([
          // Not asked (Snooze out of file descriptors): not up yet, asked again after the back-off.
          engine.healthy().catch(() => false),
          // An engine without the sleep endpoints is awake. One this process could not ask is
          // not taken for awake (a request to a sleeping engine hangs): asked again, as above.
          c.config.sleep
            ? engine.isSleeping().catch((error: unknown) => {
                if (isLocalFailure(error)) throw error;
                return false;
              })
            : false,
        ]);
    if (!healthy) throw new EngineNotUp("the engine does not answer /health");
    if (sleeping) {
      const timeoutMs = Math.max(1, until - c.deps.clock.now());
      await watched(c, record, "its wake call", (signal) => engine.wake(1, timeoutMs, signal));
    }
    sleepInstead = await warmUp(c, record, activation, until);
  } catch (error) {
    c.guard(leadership);
    // A person's stop gave it up: the next pass stops it, as a start still loading.
    if (error instanceof ActivationStopped) return;
    // Its exit, if the engine died under the call, fails the start (with its code and last words).
    const gone = await goneUnder(c, record, error);
    c.guard(leadership);
    if (gone) return;
    c.activationFailed(record, `start of ${c.id} failed: ${(error as Error).message}`);
    record.coolUntil = c.backoffUntil;
    // Not answering /health yet (a pod just Ready, a health check that failed once): asked again
    // after the back-off, until startTimeout. So is one whose check or wake call this process
    // could not make (out of file descriptors): the engine never got it, and is as it was, loaded.
    // An engine that is up but failed its wake or warm-up is stopped, as after a failed wake: the
    // next request (after the back-off) starts a clean one, rather than this one being asked
    // again and every held request failed again.
    if (!(error instanceof EngineNotUp) && !isLocalFailure(error)) await c.stopReplica(record);
    return;
  }
  c.guard(leadership);
  if (!c.present(record)) return;
  if (sleepInstead !== undefined) return sleepWithoutWarmUp(c, record, sleepInstead);
  c.lastStartMs = c.deps.clock.now() - activation.started;
  c.learner.measured("start", c.lastStartMs);
  c.succeeded(record);
  await c.setTier(record, "ready");
}

/** The platform heard this fresh engine answer /health within the last `answeredFreshMs`. */
function justAnswered(c: ReplicaOps, replica: Replica): boolean {
  const at = replica.answeredAt;
  return at !== undefined && Math.abs(c.deps.clock.now() - at) < answeredFreshMs;
}

/**
 * Whether a warm-up that failed with `error` is skipped, the engine routed without it, and why
 * (said in the log): `local`, the call never reached the engine (this process is out of file
 * descriptors or memory), so it says nothing of the engine, awake by then (its wake answered, or
 * its start's checks did), which is not stopped for Snooze's own shortage; `unauthorized`, the
 * engine answered and wants an API key on /v1 that Snooze does not have (vLLM's --api-key), and
 * its clients send theirs (found by an outside tester: a model behind --api-key never served,
 * each start "answered 401"). Its first request is then slower. Undefined: the warm-up failed.
 */
export function skippedWarmUp(
  c: ReplicaOps,
  record: ReplicaRecord,
  error: unknown,
): "local" | "unauthorized" | undefined {
  if (isLocalFailure(error)) {
    c.log.warn("warm-up could not be asked; the engine, awake, is routed without it", {
      replica: record.replica.id,
      error,
    });
    return "local";
  }
  if (isUnauthorized(error)) {
    c.log.warn(
      "the engine wants an API key on /v1 (vLLM --api-key) that Snooze does not send: routed without its warm-up",
      { replica: record.replica.id },
    );
    return "unauthorized";
  }
  return undefined;
}

/**
 * The 1-token warm-up after a start or wake (the first inference is slow without it), when on.
 * It has what is left of the activation's time (`until`): `startTimeout` from the start, or
 * `wakeTimeout` from the wake. The held requests wait for both, and an engine that is up but does
 * not answer must not make them wait a second timeout. Resolves with a level when a person's
 * sleep, with no request held, skipped it or gave it up: the engine sleeps at that level instead.
 * One this process could not make (out of file descriptors) is skipped: the engine is routed.
 */
async function warmUp(
  c: ReplicaOps,
  record: ReplicaRecord,
  activation: Activation,
  until: number,
): Promise<1 | 2 | undefined> {
  if (!c.config.warmup) return undefined;
  const asleep = c.sleepWanted();
  if (asleep !== undefined) return asleep;
  const engine = c.deps.platform.engine(record.replica);
  const timeoutMs = Math.max(1, until - c.deps.clock.now());
  const ownStop = new AbortController();
  record.warmUpCall = ownStop;
  return inSpan(
    "snooze.warmup",
    {},
    async (span) => {
      try {
        await watched(
          c,
          record,
          "its warm-up",
          (signal) => engine.warmup(c.config.servedModel ?? c.id, timeoutMs, signal),
          ownStop.signal,
        );
        return undefined;
      } catch (error) {
        if (error instanceof SleepInstead) {
          span.setAttribute("snooze.warmup.skipped", "sleep");
          return error.level;
        }
        const skipped = skippedWarmUp(c, record, error);
        if (skipped) {
          span.setAttribute("snooze.warmup.skipped", skipped);
          return undefined;
        }
        if (error instanceof EngineFrozen || (error as { timedOut?: unknown }).timedOut !== true) throw error;
        // Named by the setting a person can change, not by the milliseconds that were left.
        const budget = activation.kind === "start" ? "startTimeout" : "wakeTimeout";
        const ms = activation.kind === "start" ? c.config.startTimeout : c.config.wakeTimeout;
        throw new NoAnswer(
          `the warm-up got no answer within the ${activation.kind}'s ${budget} (${formatDuration(ms)})`,
        );
      } finally {
        if (record.warmUpCall === ownStop) record.warmUpCall = undefined;
      }
    },
    activation.context,
  );
}

/**
 * A start or wake whose warm-up a person's sleep skipped (no request waits for it): its
 * activation ends (not a failure, not measured), and the engine, loaded and awake, drains (nothing
 * runs on it but what is left of an abandoned warm-up) and sleeps at `level`.
 */
async function sleepWithoutWarmUp(c: ReplicaOps, record: ReplicaRecord, level: 1 | 2): Promise<void> {
  inActivation(record, () =>
    c.log.info("asked to sleep: warm-up skipped, the engine sleeps now", {
      replica: record.replica.id,
      sleepLevel: level,
    }),
  );
  endActivation(c, record, "stopped");
  await drainThen(c, record, level);
}

/**
 * Wakes a sleeper for the requests held. `awake`: the engine is awake already (a deepening taken
 * back half way, its level-1 wake done), so only the rest of a wake is done: warm-up and ready,
 * traced, shown and measured as a level-1 wake from `since` (the move's start).
 */
export function wake(
  c: ReplicaOps,
  record: ReplicaRecord,
  level: 1 | 2,
  { awake = false, since = c.deps.clock.now() } = {},
): Promise<void> {
  const activation = c.beginActivation("wake", record.tier, since);
  record.activation = activation;
  // Its log lines carry the activation's trace ids (tracing.md: logs join the traces).
  return context.with(activation.context, () => wakeEngine(c, record, level, activation, awake));
}

async function wakeEngine(
  c: ReplicaOps,
  record: ReplicaRecord,
  level: 1 | 2,
  activation: Activation,
  awake: boolean,
): Promise<void> {
  const leadership = c.leadership;
  const from = activation.from;
  record.wakeCalled = awake;
  await c.setTier(
    record,
    "waking",
    awake ? { since: activation.started } : { estimateMs: c.estimate("wake", level) },
  );
  // Gone while its tier was written: told as the crash it was (replica-records.ts); nothing to wake.
  if (!c.present(record)) return;
  c.log.info("waking engine", { replica: record.replica.id, from, ...(awake ? { awake } : {}) });
  const engine = c.deps.platform.engine(record.replica);
  const until = c.deps.clock.now() + c.config.wakeTimeout;
  let sleepInstead: 1 | 2 | undefined;
  let woken = awake;
  try {
    if (!awake)
      await inSpan(
        "snooze.wake",
        { "snooze.sleep_level": level },
        () => {
          record.wakeCalled = true;
          return watched(c, record, "its wake call", (signal) =>
            engine.wake(level, c.config.wakeTimeout, signal),
          );
        },
        activation.context,
      );
    woken = true;
    sleepInstead = await warmUp(c, record, activation, until);
  } catch (error) {
    c.guard(leadership);
    if (!c.present(record)) return;
    if (error instanceof ActivationStopped) {
      // A person's stop gave it up: the engine, in no known state half way, is stopped now (a
      // request that comes meanwhile starts a fresh one; none waits for it, or it would go on).
      c.log.info("wake given up: the model was stopped", { replica: record.replica.id });
      await c.stopReplica(record);
      return;
    }
    // Its exit, if the engine died under the wake or its warm-up, fails the wake as a start's
    // does: with the exit code and last words (found by an outside tester: "other side closed").
    // An engine the wake call found no longer listening died asleep, before the wake: when it is
    // seen gone, that is a crash (as if seen before the request came), and the requests held
    // wait for a fresh engine (found by a probe: a request that came within milliseconds of a
    // sleeper's crash was answered `503 activation_failed`, a few milliseconds later served).
    if (!woken && (isRefused(error) || (isReset(error) && (await listensNoMore(engine)))))
      record.diedAsleep = true;
    c.guard(leadership);
    if (!c.present(record)) return;
    const gone = await goneUnder(c, record, error);
    c.guard(leadership);
    if (gone) return;
    if (record.diedAsleep) return diedAsleep(c, record, error);
    // A failed wake leaves the engine asleep if it says so; a second failure in a row, or an
    // engine that no longer answers, is stopped so the next try starts clean. One that did not
    // answer the wake in its time is not asked again: that would add the question's own timeout
    // to the held requests' wait for an answer it cannot give.
    const stuck = (error as { timedOut?: unknown }).timedOut === true;
    // What a stuck engine printed last says where it stuck, as for a start that timed out.
    const output = stuck ? c.deps.platform.lastOutput?.(c.key, record.replica.id) : undefined;
    const reason = `wake of ${c.id} failed: ${(error as Error).message}${output ? `; its last output: ${output}` : ""}`;
    // A wake call this process could not make (out of file descriptors) never reached the engine:
    // it sleeps as it did, and is not stopped for Snooze's own shortage (the back-off still holds).
    const unasked = !woken && isLocalFailure(error);
    const sleeping =
      unasked || (c.failures < 1 && !stuck ? await engine.isSleeping().catch(() => undefined) : undefined);
    c.activationFailed(record, reason, sleeping ? from : undefined);
    record.coolUntil = c.backoffUntil;
    if (!sleeping) await c.stopReplica(record);
    return;
  }
  c.guard(leadership);
  if (!c.present(record)) return;
  if (sleepInstead !== undefined) return sleepWithoutWarmUp(c, record, sleepInstead);
  c.lastWakeMs[level] = c.deps.clock.now() - activation.started;
  c.lastWakeLevel = level;
  c.learner.measured(level === 1 ? "wake1" : "wake2", c.lastWakeMs[level]);
  c.succeeded(record);
  await c.setTier(record, "ready");
}

/**
 * Whether nothing listens at the engine's port any more (a call to it refused). A wake reset rather
 * than refused may have reached a port being closed: the connections waiting to be accepted on it
 * are reset when it closes (a vLLM server closes its port, then takes its workers down). Asked once,
 * at once, it tells a sleeper that died from one that reset a call and still serves (found under
 * load: such a wake was told as failed, 503, where a refused one got a fresh engine). A wake the
 * engine took and then died on ends in a close, not a reset, and stays a failed wake, told by its exit.
 */
async function listensNoMore(engine: Engine): Promise<boolean> {
  // Reset too: the question itself may have come to the port in the moment it was closing.
  return engine.isSleeping(exitNoticeMs).then(
    () => false,
    (error: unknown) => isRefused(error) || isReset(error),
  );
}

/**
 * A sleeper whose wake call found nothing listening, and whose process has not exited within a
 * second: it is on its way down (vLLM's server closes its port, then takes its workers down). It
 * failed on its own, as a crash does: counted (its restarts back off in a loop), and stopped; the
 * requests held are served by a fresh engine, not told the wake failed.
 */
async function diedAsleep(c: ReplicaOps, record: ReplicaRecord, error: unknown): Promise<void> {
  const reason = `${record.replica.label} no longer listened when it was woken (${(error as Error).message})`;
  c.log.warn("replica left on its own", { replica: record.replica.id, reason });
  if (c.leftOnItsOwn(reason) > 0) record.crashLoop = c.lastError;
  endActivation(c, record, "stopped");
  await c.stopReplica(record);
}
