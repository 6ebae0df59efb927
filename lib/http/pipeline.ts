import type { IncomingMessage, ServerResponse } from "node:http";
import type { Socket } from "node:net";

/** The answer of the latest request on each connection. */
const latest = new WeakMap<Socket, ServerResponse>();

/**
 * Serves pipelined requests one at a time, as nginx does. Node reads every request a client
 * pipelines at once and hands each to the handler while the answers before it are still under
 * way: a request behind a 417 was sent to the engine while the 417, its body unread then, closed
 * the connection, and the engine's answer was thrown away (found by an outside tester). So a
 * request waits until the one before it on its connection is answered, and is not served at all
 * if that answer closed the connection (RFC 9112 §9.6: nothing after the last request is
 * processed). A request with none before it under way, every request but a pipelined one, is
 * served at once.
 *
 * While a request waits for its turn the connection is not read, as nginx reads the next request
 * only once the one before it is answered: Node parses whatever a client pipelines as fast as it
 * comes, and counts nothing against it until answers are written, so behind one held request (which
 * may wait minutes for its model) every request after it was kept, bodies and all, outside
 * maxHeldBytes. 3 MB of pipelined `GET /healthz` took 1 GB, and answering them blocked the process
 * for seconds (found by an outside tester). Now what one read brought waits, no more; the connection
 * is read again when the last request read is served. A client that leaves meanwhile is seen when
 * its answers are written.
 */
export function inTurn(req: IncomingMessage, res: ServerResponse, serve: () => void): void {
  const socket = req.socket;
  const before = latest.get(socket);
  latest.set(socket, res);
  res.once("close", forget);
  if (before === undefined) serve();
  else if (before.writableFinished || before.destroyed) serveIfOpen(req, serve);
  else {
    let waiting = true;
    // After this turn of the parser: Node resumes the connection as each request it parses ends.
    queueMicrotask(() => {
      if (waiting) socket.pause();
    });
    const answered = () => {
      if (!waiting) return;
      waiting = false;
      before.off("finish", answered);
      before.off("close", answered);
      // Only the last one read: one served ahead of it would read past it again.
      if (latest.get(socket) === res) socket.resume();
      serveIfOpen(req, serve);
    };
    before.on("finish", answered);
    before.on("close", answered);
  }
}

function serveIfOpen(req: IncomingMessage, serve: () => void): void {
  // Node ends the connection as soon as its last answer is sent, before this runs.
  if (req.socket.writable && !req.socket.destroyed) serve();
  else req.resume();
}

/** An answer done is forgotten: an idle connection keeps no request or answer alive. */
function forget(this: ServerResponse): void {
  const socket = this.req.socket;
  if (socket && latest.get(socket) === this) latest.delete(socket);
}
