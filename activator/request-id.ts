import { randomUUID } from "node:crypto";
import type { IncomingMessage } from "node:http";

/**
 * The id a held request is known by once hold progress answers it (`x-request-id` in the early
 * head), given to the engine as `X-Request-Id` so that both say the same: the head goes out before
 * the engine answers, so the engine's own `x-request-id` (vLLM's `--enable-request-id-headers`)
 * could never reach the client, and OpenAI's SDKs' `_request_id` / `request_id` was empty.
 *
 * vLLM names a request by its `X-Request-Id` header, else by the body's `request_id` (its
 * extension), else a fresh uuid4 in hex; this keeps that order, so the engine's ids
 * (`chatcmpl-<id>`, `resp_<id>`, its logs) are what they would have been, and equal the header's.
 * The request's headers carry the id from then on: every forward, a resend too, sends it.
 *
 * Only on hold progress's path: an answer the engine heads itself passes its headers on as they are.
 */
export function adoptRequestId(req: IncomingMessage, body: Buffer): string {
  const own = req.headers["x-request-id"];
  if (typeof own === "string" && own !== "") return own;
  const id = bodyRequestId(body) ?? randomUUID().replaceAll("-", "");
  req.headers["x-request-id"] = id;
  return id;
}

/** The JSON body's top-level `request_id` string, if it has one (read only if it names one). */
function bodyRequestId(body: Buffer): string | undefined {
  if (!body.includes('"request_id"')) return undefined;
  try {
    const id = (JSON.parse(body.toString("utf8")) as { request_id?: unknown } | null)?.request_id;
    return typeof id === "string" && id !== "" ? id : undefined;
  } catch {
    return undefined;
  }
}
