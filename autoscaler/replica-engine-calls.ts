/**
 * The long engine calls an operation makes on a replica (a warm-up, a wake, a sleep): watched
 * through the engine's `/health`, given up together when a person's stop or the controller's end
 * asks, and, when one fails in its connection, the engine's exit waited for, since its exit code
 * says more than the cut connection. Shared by every operation on a replica (replica-*.ts).
 */
import { watchedCall } from "./engine-call-watch.ts";
import { isTransportError } from "./engine-client.ts";
import type { ReplicaOps } from "./replica-ops.ts";
import type { ReplicaRecord } from "./replica-record.ts";

/** How long a failed call waits for an engine's exit to be noticed, when the engine may have died. */
export const exitNoticeMs = 1_000;

/**
 * A long engine call on `record` (a sleep, a wake, a warm-up), watched through the engine's
 * `/health` (engine-call-watch.ts) and given up with the replica's other calls (`abandonCalls`).
 */
export function watched<T>(
  c: ReplicaOps,
  record: ReplicaRecord,
  during: string,
  call: (signal: AbortSignal) => Promise<T>,
  alsoStop?: AbortSignal,
): Promise<T> {
  record.calls ??= new AbortController();
  const engine = c.deps.platform.engine(record.replica);
  const stop = alsoStop ? AbortSignal.any([record.calls.signal, alsoStop]) : record.calls.signal;
  return watchedCall(c.deps.clock, { engine, label: record.replica.label, during, stop }, call);
}

/** Gives up the replica's long engine calls under way: each rejects at once with `reason`. */
export function abandonCalls(record: ReplicaRecord, reason: Error): void {
  record.calls?.abort(reason);
  record.calls = undefined;
}

/**
 * After an engine call failed: is the replica gone? A call that failed in its connection (refused,
 * cut) may be the engine dying under it; its exit, noticed within a second, is waited for, since
 * its code and last words say more than the connection did (`departed` keeps them).
 */
export async function goneUnder(c: ReplicaOps, record: ReplicaRecord, error: unknown): Promise<boolean> {
  if (c.present(record) && isTransportError(error))
    await c.waiters.settle(() => !c.present(record), exitNoticeMs);
  return !c.present(record);
}
