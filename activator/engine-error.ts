import { brotliDecompressSync, gunzipSync, inflateSync, zstdDecompressSync } from "node:zlib";
import { clip } from "../lib/clip.ts";
import { engineWords } from "../lib/engine-words.ts";
import { contentCoding } from "../lib/http/content-encoding.ts";
import { isObject, parseJson } from "../lib/json-object.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/**
 * How much of an engine's error answer is read to put it in OpenAI's shape: an error is a few
 * hundred bytes; an engine that sends megabytes with an error status is not read into memory for it.
 */
export const maxEngineErrorBytes = 64 * 1024;
/** How much of an engine's words goes into a message made here. */
const maxWords = 1_000;

/**
 * An error body's content codings that are decoded to read it (Snooze passes the client's
 * `Accept-Encoding` on, so an engine behind compression answers compressed).
 */
const decoders: Record<string, (body: Buffer, options: { maxOutputLength: number }) => Buffer> = {
  gzip: gunzipSync,
  "x-gzip": gunzipSync,
  deflate: inflateSync,
  br: brotliDecompressSync,
  zstd: zstdDecompressSync,
};

/** Whether an error body with this `Content-Encoding` can be read (none, or one Snooze decodes). */
export function readableCoding(encoding: string | undefined): boolean {
  const coding = contentCoding(encoding);
  return !coding || coding in decoders;
}

/**
 * The text of an error body as the engine sent it; undefined when it cannot be decoded (a corrupt
 * or oversized stream, a coding Snooze does not read).
 */
export function errorBodyText(body: Buffer, encoding: string | undefined): string | undefined {
  const coding = contentCoding(encoding);
  if (!coding || body.length === 0) return body.toString();
  const decode = decoders[coding];
  if (!decode) return undefined;
  try {
    return decode(body, { maxOutputLength: maxEngineErrorBytes }).toString();
  } catch {
    return undefined;
  }
}

/**
 * The data of the SSE event that tells an engine's error answer once hold progress has answered 200
 * (relay.ts): OpenAI's clients raise an error for an event whose data holds an `error` object, and
 * take anything else for a chunk of the answer (FastAPI's `{"detail":"Not Found"}`) or fail to
 * parse it (uvicorn's plain-text `Internal Server Error`). vLLM's own errors have that shape
 * already and pass as the engine wrote them; older vLLM's flat `{"object":"error","message",...}`
 * keeps its message, type, param and code; anything else becomes an `engine_error` carrying the
 * engine's status and words.
 */
export function engineErrorEvent(status: number, body: string): string {
  const parsed = parseJson(body);
  const shaped = inOpenAIShape(status, parsed, body);
  // The engine's own shape, on one line (an SSE event's data must not break across lines).
  return shaped
    ? JSON.stringify(shaped)
    : (stringify(parsed) ?? JSON.stringify(inOpenAIShape(status, undefined, body)));
}

/**
 * An engine's error answer passed on as the answer itself, in OpenAI's shape: OpenAI's clients
 * show only "404 status code (no body)" for a body without an `error` object, so the engine's
 * words would be lost. The engine's own fields stay beside `error`, as it wrote them (older vLLM's
 * flat `object`, `message`, ...; FastAPI's `detail`), for a client that reads them; `error` is
 * written last, so it is the one a JSON parser keeps. Undefined: it has that shape already, and
 * passes untouched.
 */
export function engineErrorAnswer(status: number, body: string): string | undefined {
  const parsed = parseJson(body);
  const shaped = inOpenAIShape(status, parsed, body);
  if (!shaped) return undefined;
  const error = JSON.stringify(shaped.error);
  if (!isObject(parsed)) return `{"error":${error}}`;
  // An `error` that is not an object (a string, null) is replaced, not written twice.
  if ("error" in parsed) return stringify({ ...parsed, ...shaped }) ?? JSON.stringify(shaped);
  const text = body.trim();
  const empty = Object.keys(parsed).length === 0;
  return `${text.slice(0, -1).trimEnd()}${empty ? "" : ","}"error":${error}}`;
}

/** JSON text of a parsed value; undefined for one nested too deep to write again. */
function stringify(value: unknown): string | undefined {
  try {
    return JSON.stringify(value);
  } catch {
    return undefined;
  }
}

/** The error in OpenAI's shape; undefined when `parsed` has it already. */
function inOpenAIShape(status: number, parsed: unknown, body: string): OpenAIErrorBody | undefined {
  if (isObject(parsed) && isObject(parsed.error)) return undefined;
  const type = status >= 500 ? "server_error" : "invalid_request_error";
  if (isObject(parsed) && typeof parsed.message === "string" && parsed.message.trim() !== "") {
    const text = (value: unknown) =>
      typeof value === "string" || typeof value === "number" ? String(value) : null;
    return openAIError(
      engineWords(clip(parsed.message, maxWords)),
      text(parsed.type) ?? type,
      text(parsed.code),
      text(parsed.param),
    );
  }
  // TGI's error is a string, its kind in `error_type`: its words, not the body's JSON text (found by
  // an outside tester: the client read `{"error":"Input validation error: …","error_type":…}`).
  const said = isObject(parsed) && typeof parsed.error === "string" && parsed.error.trim() !== "";
  const detail = isObject(parsed) && "detail" in parsed ? parsed.detail : said ? parsed.error : undefined;
  const words = (typeof detail === "string" ? detail : (stringify(detail) ?? body))
    .replace(/\s+/g, " ")
    .trim();
  const clipped = engineWords(clip(words, maxWords));
  const kind =
    said && typeof parsed.error_type === "string" && parsed.error_type !== "" ? parsed.error_type : type;
  return openAIError(`The engine answered ${status}${clipped ? `: ${clipped}` : ""}.`, kind, "engine_error");
}
