import type { Writable } from "node:stream";

/** What latestStateWriter gives: `send` a newer state, `end` the stream after the last one waiting. */
export interface LatestStateWriter<T> {
  send(state: T): void;
  end(): void;
}

/**
 * Writes a stream of states to `out` (one line, event or message each: `encode` gives what `out`
 * takes, a string, or an object to an object-mode stream such as a gRPC call's) at the pace its
 * reader takes them:
 * once `out` holds more than its highWaterMark unsent (`write` answered false), newer states are
 * folded into one (`merge`: the waiting one and the newer) that goes out on 'drain'. A state stream
 * needs only its latest state, and writing on regardless made a reader that stopped reading cost
 * the writer every state since, in memory, without end. What `out` holds stays at most its
 * highWaterMark and one state.
 */
export function latestStateWriter<T>(
  out: Writable,
  encode: (state: T) => unknown,
  merge: (waiting: T, newer: T) => T,
): LatestStateWriter<T> {
  let waiting: { state: T } | undefined;
  let blocked = false;
  const write = (state: T) => {
    if (out.destroyed || out.writableEnded) return;
    if (out.write(encode(state))) return;
    blocked = true;
    out.once("drain", () => {
      blocked = false;
      const next = waiting;
      waiting = undefined;
      if (next) write(next.state);
    });
  };
  return {
    send(state) {
      if (blocked) waiting = { state: waiting ? merge(waiting.state, state) : state };
      else write(state);
    },
    end() {
      if (out.destroyed || out.writableEnded) return;
      const last = waiting;
      waiting = undefined;
      if (last) out.end(encode(last.state));
      else out.end();
    },
  };
}
