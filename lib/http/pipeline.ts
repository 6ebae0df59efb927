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
    const answered = () => {
      if (!waiting) return;
      waiting = false;
      before.off("finish", answered);
      before.off("close", answered);
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
