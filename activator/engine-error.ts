import { clip } from "../lib/clip.ts";
import { isObject } from "../lib/json-object.ts";
import { openAIError } from "../lib/openai-error.ts";

/**
 * How much of an engine's error answer is kept to tell it in a stream: an error is a few hundred
 * bytes; an engine that sends megabytes with an error status is not read into memory for it.
 */
export const maxEngineErrorBytes = 64 * 1024;
/** How much of an engine's words goes into a message made here. */
const maxWords = 1_000;

/**
 * The data of the SSE event that tells an engine's error answer once hold progress has answered 200
 * (proxy.ts): OpenAI's clients raise an error for an event whose data holds an `error` object, and
 * take anything else for a chunk of the answer (FastAPI's `{"detail":"Not Found"}`) or fail to
 * parse it (uvicorn's plain-text `Internal Server Error`). vLLM's own errors have that shape
 * already and pass as the engine wrote them; older vLLM's flat `{"object":"error","message",...}`
 * keeps its message, type, param and code; anything else becomes an `engine_error` carrying the
 * engine's status and words.
 */
export function engineErrorEvent(status: number, body: string): string {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    parsed = undefined;
  }
  if (isObject(parsed) && isObject(parsed.error)) return JSON.stringify(parsed);
  const type = status >= 500 ? "server_error" : "invalid_request_error";
  if (isObject(parsed) && typeof parsed.message === "string") {
    const text = (value: unknown) =>
      typeof value === "string" || typeof value === "number" ? String(value) : null;
    return JSON.stringify(
      openAIError(parsed.message, text(parsed.type) ?? type, text(parsed.code), text(parsed.param)),
    );
  }
  const detail = isObject(parsed) && "detail" in parsed ? parsed.detail : undefined;
  const words = (typeof detail === "string" ? detail : detail !== undefined ? JSON.stringify(detail) : body)
    .replace(/\s+/g, " ")
    .trim();
  const clipped = clip(words, maxWords);
  return JSON.stringify(
    openAIError(`The engine answered ${status}${clipped ? `: ${clipped}` : ""}.`, type, "engine_error"),
  );
}
