import type { IncomingMessage, ServerResponse } from "node:http";

/** Answers written whole whose connection lingers for the rest of the body (not ended yet). */
const lingering = new WeakSet<ServerResponse>();

/** Whether the answer has been given: ended, or written whole and lingering. */
export const answered = (res: ServerResponse): boolean => res.writableEnded || lingering.has(res);

/**
 * How long a lingering connection waits for the next byte of the body, and in all (nginx's
 * lingering_timeout and lingering_time); a connection the parser refused lingers the same
 * (client-error.ts).
 */
export const lingerIdleMs = 2_000;
export const lingerMaxMs = 30_000;

/**
 * Ends an answer given before the request's body was read, on a connection that then closes
 * (`Connection: close`), the way nginx's `lingering_close` does. Closed at once, the connection is
 * reset by the client's next bytes, and a client still uploading (Node's fetch, any client that
 * reads the answer only once its upload is done) loses the answer: it sees a reset instead of the
 * 413 or 503. So the answer is written whole now, and the connection closed once the rest of the
 * body has arrived (read and dropped), or after `lingerIdleMs` without a byte of it (a client that waits
 * for `100 Continue` sends none), or `lingerMaxMs` in all.
 */
export function endLingering(req: IncomingMessage, res: ServerResponse, last: string): void {
  res.write(last);
  // Node corks the connection for a write until the next tick: uncorked now, the answer leaves
  // before anything later in this turn can destroy the connection (a shutdown's closeAllConnections).
  res.socket?.uncork();
  lingering.add(res);
  let idle: NodeJS.Timeout | undefined;
  const end = () => {
    clearTimeout(idle);
    clearTimeout(cap);
    req.off("data", onData);
    req.off("end", end);
    req.off("close", end);
    req.off("error", end);
    if (!res.writableEnded) res.end();
  };
  const onData = () => {
    clearTimeout(idle);
    idle = setTimeout(end, lingerIdleMs);
  };
  const cap = setTimeout(end, lingerMaxMs);
  onData();
  req.on("data", onData);
  req.once("end", end);
  req.once("close", end);
  req.once("error", end);
  req.resume();
}
