/**
 * Which paths may reach an engine. A vLLM engine serves more than the OpenAI API on the same port:
 * with dev mode on (which sleep mode needs) `/sleep`, `/wake_up`, `/collective_rpc`, and under
 * `/v1/` itself `/v1/load_lora_adapter` and `/v1/unload_lora_adapter`. The engine's HTTP stack may
 * resolve dot-segments and percent-escapes on its own, so the activator decides on a normalised
 * path and forwards exactly that path, never the client's text.
 */

/**
 * The OpenAI-compatible routes vLLM's API server serves under `/v1/` that take a request for one
 * model (all POST; `GET /v1/models` the activator answers itself), and `/v2/rerank`, the route
 * Cohere's v2 client (`cohere.ClientV2`) posts to, which vLLM serves as it serves `/v1/rerank`.
 * vLLM's own non-OpenAI routes (`/tokenize`, `/pooling`, `/classify`, `/score` without `/v1`) and
 * its admin routes are not here.
 */
export const engineRoutes: ReadonlySet<string> = new Set([
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/embeddings",
  "/v1/responses",
  "/v1/audio/transcriptions",
  "/v1/audio/translations",
  "/v1/score",
  "/v1/rerank",
  "/v2/rerank",
]);

/**
 * The paths the server hands to the activator, which checks them against `engineRoutes`: under
 * `/v1/`, and under `/v2/` for `/v2/rerank` (found by an outside tester: Cohere's v2 client got
 * "No route for POST /v2/rerank" where vLLM would have answered it).
 */
export function underApiVersion(path: string): boolean {
  return path.startsWith("/v1/") || path.startsWith("/v2/");
}

/**
 * The routes on which vLLM answers `stream: true` with an SSE stream (its chat, completion and
 * responses servers; its speech-to-text server for transcriptions and translations). Its pooling
 * routes (`/v1/embeddings`, `/v1/score`, `/v1/rerank`) answer JSON whatever `stream` says: hold
 * progress, which opens an SSE stream before the engine answers, is only for these.
 */
export const streamingRoutes: ReadonlySet<string> = new Set([
  "/v1/chat/completions",
  "/v1/completions",
  "/v1/responses",
  "/v1/audio/transcriptions",
  "/v1/audio/translations",
]);

/** The answer for each route written exactly, made once: the request path allocates none. */
const exactRoutes: ReadonlyMap<string, PathCheck> = new Map(
  [...engineRoutes].map((path) => [path, Object.freeze({ ok: true as const, path })]),
);

export type PathCheck =
  /** `path` is the normalised route to forward; the query string is dropped (no route takes one). */
  { ok: true; path: string } | { ok: false; reason: string };

/**
 * Normalises a request target and checks it against `engineRoutes`. Refused outright, before any
 * decoding: backslashes, encoded slashes or backslashes (`%2f`, `%5c`), NUL and other control
 * characters (raw or encoded), empty segments (`//`), a fragment, a target that is not an absolute
 * path. Then percent-escapes are decoded once (a malformed escape is refused; a decoded `%` is
 * refused so nothing double-decodes downstream) and dot-segments removed (RFC 3986 §5.2.4).
 */
export function checkEnginePath(target: string): PathCheck {
  const query = target.indexOf("?");
  const raw = query < 0 ? target : target.slice(0, query);
  // What nearly every client sends: a route as written, which nothing below would change.
  const exact = exactRoutes.get(raw);
  if (exact) return exact;
  if (!raw.startsWith("/")) return { ok: false, reason: "not an absolute path" };
  if (raw.includes("#")) return { ok: false, reason: "a fragment" };
  if (raw.includes("\\")) return { ok: false, reason: "a backslash" };
  if (raw.includes("//")) return { ok: false, reason: "an empty path segment" };
  // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what this refuses
  if (/[\u0000-\u001f\u007f]/.test(raw)) return { ok: false, reason: "a control character" };
  if (/%(2f|5c|00|[01][0-9a-f]|7f|25)/i.test(raw))
    return { ok: false, reason: "an encoded slash, backslash, percent sign or control character" };
  let decoded: string;
  try {
    decoded = decodeURIComponent(raw);
  } catch {
    return { ok: false, reason: "a malformed percent-escape" };
  }
  const path = removeDotSegments(decoded);
  if (path.includes("//")) return { ok: false, reason: "an empty path segment" };
  if (!engineRoutes.has(path)) return { ok: false, reason: "not an OpenAI route the engine serves" };
  return { ok: true, path };
}

/** RFC 3986 §5.2.4 on an absolute path: `.` segments go, `..` removes the segment before it. */
export function removeDotSegments(path: string): string {
  const out: string[] = [];
  const segments = path.split("/").slice(1);
  for (const [index, segment] of segments.entries()) {
    const last = index === segments.length - 1;
    if (segment === ".") {
      if (last) out.push("");
    } else if (segment === "..") {
      out.pop();
      if (last) out.push("");
    } else out.push(segment);
  }
  return `/${out.join("/")}`;
}
