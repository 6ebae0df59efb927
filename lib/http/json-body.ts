import { jsonText } from "./json-encoding.ts";
import { parseAsPython } from "./python-json.ts";

/**
 * A JSON request body as routing reads it. `parsed` is its value (from a worker thread, only what
 * routing looks at: `routingView`); `invalid` is why it is not JSON; `sent` is what goes to the engine: the client's
 * bytes, or their text as UTF-8 when they came in another encoding vLLM reads (a byte order mark,
 * UTF-16), so that renaming a model works on it too.
 */
export interface JsonBody {
  parsed?: unknown;
  invalid?: Error;
  sent: Buffer;
}

/** Reads `body` as JSON here, on the caller's thread. */
export function readJsonBody(body: Buffer): JsonBody {
  const { text, utf8 } = jsonText(body);
  const sent = utf8 ? body : Buffer.from(text);
  try {
    return { parsed: parseAsPython(text), sent };
  } catch (error) {
    return { invalid: error as Error, sent };
  }
}

/**
 * What routing reads of a parsed body, and no more: its kind (an object, an array, null, a string
 * ...) and an object's top-level `model`, `stream`, `request_id` (which hold progress names a
 * request by: activator/request-id.ts) and `previous_response_id` (which replica a Responses API
 * follow-up goes to: activator/response-ids.ts), a member that is an object or an array standing as an empty
 * one of its kind. Small whatever the body, so it crosses from a worker thread at no cost.
 */
export function routingView(parsed: unknown): unknown {
  if (Array.isArray(parsed)) return [];
  if (typeof parsed !== "object" || parsed === null) return parsed;
  const { model, stream, request_id, previous_response_id } = parsed as {
    model?: unknown;
    stream?: unknown;
    request_id?: unknown;
    previous_response_id?: unknown;
  };
  const small = (value: unknown) =>
    Array.isArray(value) ? [] : typeof value === "object" && value !== null ? {} : value;
  return {
    ...(model !== undefined ? { model: small(model) } : {}),
    ...(stream !== undefined ? { stream: small(stream) } : {}),
    ...(request_id !== undefined ? { request_id: small(request_id) } : {}),
    ...(previous_response_id !== undefined ? { previous_response_id: small(previous_response_id) } : {}),
  };
}
