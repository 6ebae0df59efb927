import type { IncomingMessage, Server, ServerResponse } from "node:http";
import { clip } from "../clip.ts";
import { openAIError } from "../openai-error.ts";
import { sendError } from "./json.ts";
import { inTurn } from "./pipeline.ts";

/**
 * `Expect: 100-continue`: the client sends the headers and waits for `100 Continue` before the
 * body (curl does for bodies over 1 MiB). Node answers it on its own unless the server listens to
 * 'checkContinue'; with `deferContinue` a handler first decides (a refused path, a body too large,
 * a full budget: the client then never uploads the body) and calls `sendContinue` before reading.
 */
const awaiting = new WeakSet<IncomingMessage>();

/**
 * Routes requests that expect 100-continue to `handler` as ordinary requests, with no
 * `100 Continue` until the handler calls `sendContinue`: one that answers without reading the
 * body (a refusal, a 404) never has the client upload it. Any other expectation is refused with
 * 417 (RFC 9110 §10.1.1), in OpenAI's error shape rather than Node's bare status line.
 */
export function deferContinue(
  server: Server,
  handler: (req: IncomingMessage, res: ServerResponse) => void,
  refused: (status: number) => void = () => {},
): void {
  // In turn like every other request: a request pipelined behind the 417 (which closes the
  // connection, the body unread) is not served.
  const refuse = (req: IncomingMessage, res: ServerResponse) =>
    inTurn(req, res, () => {
      refused(417);
      sendError(
        res,
        417,
        openAIError(
          `Expect: ${clip(String(req.headers.expect)) || "(empty)"} cannot be met: Snooze knows only 100-continue. Send the request without it.`,
          "invalid_request_error",
          "expectation_failed",
        ),
      );
    });
  server.on("checkContinue", (req: IncomingMessage, res: ServerResponse) => {
    // Node takes `100-continue, foo` (or two Expect headers) for 100-continue: the other is refused.
    const others = String(req.headers.expect)
      .split(",")
      .some((e) => e.trim().toLowerCase() !== "100-continue");
    if (others) return refuse(req, res);
    awaiting.add(req);
    handler(req, res);
  });
  server.on("checkExpectation", refuse);
}

/** Sends `100 Continue` if the client still waits for it; call it right before reading the body. */
export function sendContinue(req: IncomingMessage, res: ServerResponse): void {
  if (awaiting.delete(req) && !res.headersSent && !res.destroyed) res.writeContinue();
}
