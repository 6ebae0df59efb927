import type { IncomingMessage, ServerResponse } from "node:http";
import type { Readable } from "node:stream";
import { forwardedFor } from "./forwarded-for.ts";
import { endToEnd } from "./hop-headers.ts";
import type { Backend } from "./model-route.ts";
import { type ForwardOutcome, type ForwardRequest, Relay } from "./relay.ts";

/**
 * Sends the request to the engine and streams the answer back untouched:
 * headers as they come, body chunk by chunk with backpressure, and a client
 * that goes away cancels the engine's request. Every path but `unreachable`
 * ends the client's response: an answer, an OpenAI-shaped error, an SSE error
 * event, or (for a non-SSE answer already under way) a cut connection.
 */
export function forward(
  req: IncomingMessage,
  res: ServerResponse,
  backend: Backend,
  request: ForwardRequest,
): Promise<ForwardOutcome> {
  return new Promise((resolve) => {
    const relay = new Relay(res, request, resolve);
    const headers = endToEnd(req.headers);
    const chain = forwardedFor(headers["x-forwarded-for"] as string | undefined, req.socket.remoteAddress);
    backend.pool.dispatch(
      {
        path: request.path,
        method: req.method as "POST",
        headers: {
          ...headers,
          ...(chain ? { "x-forwarded-for": chain } : {}),
          ...request.extraHeaders,
          // Hold progress has answered already, uncompressed: the engine's bytes go into that
          // stream, so they must come uncompressed too, whatever the client accepts.
          ...(res.headersSent ? { "accept-encoding": "identity" } : {}),
          "content-length": String(request.body.length),
        } as Record<string, string>,
        body: bodyToWrite(request.body),
        headersTimeout: request.firstByteTimeoutMs,
        bodyTimeout: request.idleTimeoutMs,
      },
      relay,
    );
  });
}

/**
 * A body past this is written as a stream. Smaller ones fit the socket's buffers and the kernel's,
 * and are written as a Buffer, the quickest way.
 */
const streamedBodyBytes = 64 * 1024;

/**
 * The body as undici is to write it. A large one as a stream of one chunk: undici then waits until
 * the socket has taken it, and closes a connection whose answer ended before that (an engine that
 * answered early, a 413 say, and read no more of the body). Given a Buffer, undici takes the
 * request as sent once the Buffer is queued on the socket, and the connection as free once the
 * answer ends: the next request was written behind the bytes the engine never read, and waited
 * out the engine's firstByteTimeout for a 504 (found by an outside tester).
 */
function bodyToWrite(body: Buffer): Buffer | Readable | undefined {
  if (body.length === 0) return undefined;
  if (body.length <= streamedBodyBytes) return body;
  // An async iterable, not a Readable: undici writes a Readable's chunks as they come and ends the
  // request at its 'end', without waiting for the socket to drain; an iterable's each chunk waits
  // for it. undici's types leave iterables out; its HTTP/1.1 writer takes them (`writeIterable`).
  return (async function* () {
    yield body;
  })() as unknown as Readable;
}
