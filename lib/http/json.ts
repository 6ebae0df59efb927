import type { ServerResponse } from "node:http";
import type { OpenAIErrorBody } from "../openai-error.ts";
import { answered, endLingering } from "./linger.ts";

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
  const text = JSON.stringify(body);
  // Answered before the body was read: the connection closes, for it cannot be reused (a client
  // that waits for `100 Continue` will not send the body; one that sent part of it left bytes that
  // cannot be read as the next request), once the body is in (see endLingering).
  const unread = res.req !== undefined && !res.req.complete;
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
    ...(unread ? { connection: "close" } : {}),
  });
  if (unread) endLingering(res.req, res, text);
  else res.end(text);
}

export function sendError(
  res: ServerResponse,
  status: number,
  error: OpenAIErrorBody,
  headers: Record<string, string> = {},
): void {
  sendJson(res, status, error, headers);
}

/**
 * Whether a request's Content-Type says JSON, in any case (RFC 9110 §8.3.1: `Application/JSON`);
 * none at all is read as JSON, as the engine reads it.
 */
export const isJsonType = (contentType: string | undefined): boolean =>
  (contentType ?? "application/json").toLowerCase().includes("json");
