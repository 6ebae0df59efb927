import type { IncomingMessage, ServerResponse } from "node:http";
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
        body: request.body.length > 0 ? request.body : undefined,
        headersTimeout: request.firstByteTimeoutMs,
        bodyTimeout: request.idleTimeoutMs,
      },
      relay,
    );
  });
}
