import type { IncomingMessage } from "node:http";
import { type JsonBody, readJsonBody } from "../lib/http/json-body.ts";
import { freshRequestId } from "../lib/http/request-id.ts";

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
export function adoptRequestId(req: IncomingMessage, body: Buffer, json?: JsonBody): string {
  const own = req.headers["x-request-id"];
  if (typeof own === "string" && own !== "") return own;
  const named = bodyRequestId(body, json);
  // One no header can carry as it is: the engine still names the request by it (no header goes,
  // so vLLM reads the body's), and the head gets an id of its own. Found by an outside tester: a
  // line break in it made writing the head throw in a timer, which ended the whole process.
  if (named !== undefined && !fitsHeader(named)) return freshRequestId();
  const id = named ?? freshRequestId();
  req.headers["x-request-id"] = id;
  return id;
}

/** The longest body `request_id` sent as a header: well inside every parser's header limit (16 KiB for Node's and uvicorn's). */
const maxHeaderId = 1_024;

/**
 * Whether an id reads the same as a header value on both sides: visible ASCII, spaces only inside
 * (a parser drops them at the edges, and vLLM would name the request by what is left), short enough.
 * Node refuses a line break, a control character or one past Latin-1 in a header outright.
 */
function fitsHeader(id: string): boolean {
  return id.length <= maxHeaderId && /^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(id);
}

/**
 * The JSON body's top-level `request_id` string, if it has one: from `json` when the body was read
 * off the event loop (a large one, whose parse would hold every other client), else read here, only
 * if the body names one at all.
 */
function bodyRequestId(body: Buffer, json: JsonBody | undefined): string | undefined {
  if (!json && !body.includes('"request_id"')) return undefined;
  const parsed = (json ?? readJsonBody(body)).parsed as { request_id?: unknown } | null | undefined;
  const id = parsed?.request_id;
  return typeof id === "string" && id !== "" ? id : undefined;
}
