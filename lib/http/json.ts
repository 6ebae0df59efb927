import type { IncomingMessage, ServerResponse } from "node:http";
import { escapeLineBreakers } from "../json-line.ts";
import type { OpenAIErrorBody } from "../openai-error.ts";
import { answered, endLingering } from "./linger.ts";
import { requestIdOf } from "./request-id.ts";

export function sendJson(
  res: ServerResponse,
  status: number,
  body: unknown,
  headers: Record<string, string> = {},
): void {
  // Answered already (a shutdown answered for a call still under way): nothing more to say.
  if (answered(res)) return;
  if (res.headersSent) {
    res.destroy();
    return;
  }
  // The characters JSON leaves raw that a terminal obeys or a reader takes for a line's end (an
  // engine's output in the logs API, a C1 CSI in its last words) as `\u` escapes: the same JSON
  // once parsed, and a body that `curl` prints as text.
  const text = escapeLineBreakers(JSON.stringify(body));
  // Answered before the body was read: the connection closes, for it cannot be reused (a client
  // that waits for `100 Continue` will not send the body; one that sent part of it left bytes that
  // cannot be read as the next request), once the body is in (see endLingering).
  const unread = res.req !== undefined && bodyToCome(res.req);
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    // Snooze's own JSON is live state (the admin API's view of models and replicas) or an error
    // about one request: no cache may keep it, and no browser may read it as anything but JSON
    // (found by an outside tester: the admin JSON had neither).
    "cache-control": "no-store",
    "x-content-type-options": "nosniff",
    ...headers,
    ...(unread ? { connection: "close" } : {}),
  });
  if (unread) endLingering(res.req, res, text);
  else res.end(text);
}

/**
 * The request has a body not read yet. One without a body (a GET, `Content-Length: 0`) is not
 * `complete` yet while its handler runs either (Node marks it after the 'request' event), but
 * nothing of it is left: its connection stays open (found by an outside tester: every
 * `GET /v1/models`, an SDK's `models.list()`, cost a new connection).
 */
function bodyToCome(req: IncomingMessage): boolean {
  if (req.complete) return false;
  const length = req.headers["content-length"];
  return req.headers["transfer-encoding"] !== undefined || (length !== undefined && Number(length) !== 0);
}

/** The OpenAI error `code` each response was answered with (see `errorCodeOf`). */
const errorCodes = new WeakMap<ServerResponse, string>();

/**
 * Answers with an OpenAI-shaped error: every error Snooze writes itself comes here. It names the
 * request in `x-request-id` (`requestIdOf`), as the engine's answer would have: OpenAI's SDKs show
 * it as the error's `request_id`, which was empty on Snooze's own 404s and 503s.
 */
export function sendError(
  res: ServerResponse,
  status: number,
  error: OpenAIErrorBody,
  headers: Record<string, string> = {},
): void {
  // Already answered (sendJson then says nothing more, or cuts a stream): no id to make.
  const open = !answered(res) && !res.headersSent;
  if (open) noteErrorCode(res, error);
  sendJson(res, status, error, open ? { "x-request-id": requestIdOf(res.req), ...headers } : headers);
}

/** Remembers the OpenAI error `code` a response carries (also one told mid-stream, as an SSE event). */
export function noteErrorCode(res: ServerResponse, error: OpenAIErrorBody): void {
  const { code } = error.error;
  if (typeof code === "string" && code !== "") errorCodes.set(res, code);
}

/**
 * The OpenAI error `code` a response was answered with, if any: a low-cardinality name for why it
 * failed, the `error.type` of its server span.
 */
export function errorCodeOf(res: ServerResponse): string | undefined {
  return errorCodes.get(res);
}

/**
 * Whether a request's Content-Type says JSON, in any case (RFC 9110 §8.3.1: `Application/JSON`);
 * none at all is read as JSON, as the engine reads it.
 */
export const isJsonType = (contentType: string | undefined): boolean =>
  (contentType ?? "application/json").toLowerCase().includes("json");
