/**
 * vLLM's JSON routes (chat, completions, responses, tokenize) take only `application/json`: any other
 * Content-Type, or none, is refused by its `validate_json_request` dependency as a one-item
 * validation error without a `param`. FastAPI reads the body first, though: without a
 * Content-Type, or with another JSON one (`application/x+json`), a body that is not JSON is its
 * `json_invalid` error instead.
 */
import type { IncomingHttpHeaders } from "node:http";
import { requestFields } from "./request-fields.ts";
import { errorBody, VllmHttpError } from "./vllm-error.ts";

export function requireJsonMediaType(headers: IncomingHttpHeaders, rawBody: string): void {
  const contentType = headers["content-type"];
  const mediaType = (contentType ?? "").toLowerCase().split(";", 1)[0]!.trim();
  if (mediaType === "application/json") return;
  const readAsJson = contentType === undefined || /^application\/[^/]*\+json$/.test(mediaType);
  if (readAsJson && rawBody.length > 0) requestFields(rawBody);
  throw new VllmHttpError(
    400,
    errorBody(
      "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
      "Bad Request",
      400,
    ),
  );
}
