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
  res.writeHead(status, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  // Answered before the body was read, and closing: closed once the body is in (see endLingering).
  if (headers.connection === "close" && res.req && !res.req.complete) endLingering(res.req, res, text);
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
