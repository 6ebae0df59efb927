import { engineOwnRoute } from "./engine-own-routes.ts";

/**
 * Which paths may reach an engine. A vLLM engine serves more than the OpenAI API on the same port:
 * with dev mode on (which sleep mode needs) `/sleep`, `/wake_up`, `/collective_rpc`, and under
 * `/v1/` itself `/v1/load_lora_adapter` and `/v1/unload_lora_adapter`. The engine's HTTP stack may
 * resolve dot-segments and percent-escapes on its own, so the activator decides on a normalised
 * path and forwards exactly that path, never the client's text.
 */

/**
 * The routes vLLM's API server serves that take a request for one model (all POST; `GET /v1/models`
 * the activator answers itself):
 * - the OpenAI-compatible ones under `/v1/`;
 * - `/v2/rerank`, where Cohere's v2 client (`cohere.ClientV2`) posts; vLLM serves it as `/v1/rerank`;
 * - vLLM's own inference routes outside `/v1/` (found by an outside tester: "No route for POST
 *   /tokenize" where vLLM answers): tokenization, pooling, classification, scoring, reranking, and
 *   SageMaker's `/invocations`, which vLLM dispatches by the body's shape;
 * - Anthropic's Messages API (`/v1/messages`, `/v1/messages/count_tokens`), which vLLM serves for
 *   Anthropic's clients (Claude Code with `ANTHROPIC_BASE_URL`);
 * - newer vLLM's render routes (`/v1/chat/completions/render`, `/v1/completions/render`: a prompt's
 *   tokens as the engine would make them, JSON even with `stream: true`), which routers call.
 * Each is routed by the body's `model` (or `snooze-model`, or the Host), held and forwarded as the
 * `/v1/` ones are. vLLM's engine-private routes and those about one engine process are not here
 * (`engine-own-routes.ts`).
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
  "/v1/messages",
  "/v1/messages/count_tokens",
  "/v1/chat/completions/render",
  "/v1/completions/render",
  "/tokenize",
  "/detokenize",
  "/pooling",
  "/classify",
  "/score",
  "/rerank",
  "/invocations",
]);

/** The routes of `engineRoutes` outside `/v1/` and `/v2/`, which the server hands on by name. */
const rootRoutes: ReadonlySet<string> = new Set(
  [...engineRoutes].filter((path) => !path.startsWith("/v1/") && !path.startsWith("/v2/")),
);

/**
 * The paths the server hands to the activator, which checks them against `engineRoutes`: under
 * `/v1/`, under `/v2/` for `/v2/rerank` (found by an outside tester: Cohere's v2 client got
 * "No route for POST /v2/rerank" where vLLM would have answered it), and vLLM's inference routes
 * outside them, as written.
 */
export function forActivator(path: string): boolean {
  return path.startsWith("/v1/") || path.startsWith("/v2/") || rootRoutes.has(path);
}

/**
 * The routes on which vLLM answers `stream: true` with an SSE stream (its chat, completion and
 * responses servers; its speech-to-text server for transcriptions and translations). Its pooling
 * routes (`/v1/embeddings`, `/v1/score`, `/v1/rerank`) answer JSON whatever `stream` says: hold
 * progress, which opens an SSE stream before the engine answers, is only for these. Not Anthropic's
 * `/v1/messages` either: its clients read only named events, so a failure told as an unnamed
 * `data:` event after progress would end their stream without a word.
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
  /**
   * `path` is the normalised route to forward; the query string is dropped (no route takes one but
   * a stored response's retrieve, whose own parameters `path` carries, re-encoded). `stored`: a
   * route of one stored response (`storedResponseRoute`), which names no model in its body.
   */
  | { ok: true; path: string; stored?: StoredResponseRoute }
  /**
   * `advice`: the path is a vLLM route Snooze keeps back, and why (`engineOwnRoute`), or a near miss
   * of an inference route, and which one it meant (`nearRoute`).
   */
  | { ok: false; reason: string; advice?: string };

/**
 * vLLM's routes of one response it stored (with `VLLM_ENABLE_RESPONSES_API_STORE=1`): retrieve it
 * (`GET`, or as a stream again with `?stream=true&starting_after=N`) and cancel a background one.
 * `route` is the template spans are named by: never the id, one per response.
 */
export interface StoredResponseRoute {
  id: string;
  method: "GET" | "POST";
  route: "/v1/responses/{response_id}" | "/v1/responses/{response_id}/cancel";
}

/** A response id as vLLM makes them (`resp_` and hex, or a client's `request_id`): nothing to decode. */
const responseId = /^[A-Za-z0-9_.~-]{1,256}$/;
/** The query parameters vLLM's retrieve reads; any other is dropped. */
const retrieveParameters = new Set(["stream", "starting_after", "include", "include[]"]);

/** The stored-response route a normalised path is, if any, with the path and query to forward. */
function storedResponseRoute(
  path: string,
  query: string,
): { path: string; stored: StoredResponseRoute } | undefined {
  const parts = path.split("/");
  // ["", "v1", "responses", id] or ["", "v1", "responses", id, "cancel"]
  if (parts.length < 4 || parts.length > 5 || parts[1] !== "v1" || parts[2] !== "responses") return undefined;
  const id = parts[3]!;
  if (!responseId.test(id)) return undefined;
  if (parts.length === 5) {
    if (parts[4] !== "cancel") return undefined;
    return { path, stored: { id, method: "POST", route: "/v1/responses/{response_id}/cancel" } };
  }
  const kept = new URLSearchParams();
  for (const [name, value] of new URLSearchParams(query))
    if (retrieveParameters.has(name)) kept.append(name, value);
  const search = kept.toString();
  return {
    path: search ? `${path}?${search}` : path,
    stored: { id, method: "GET", route: "/v1/responses/{response_id}" },
  };
}

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
  if (engineRoutes.has(path)) return { ok: true, path };
  const stored = storedResponseRoute(path, query < 0 ? "" : target.slice(query + 1));
  if (stored) return { ok: true, ...stored };
  // A vLLM route outside /v1/ asked under it (an OpenAI client's base URL ends in /v1): where it is.
  const outside = path.startsWith("/v1/") ? path.slice(3) : "";
  const advice =
    engineOwnRoute(path) ??
    (rootRoutes.has(outside) ? `vLLM serves it outside /v1/, as POST ${outside}.` : nearRoute(path));
  return { ok: false, reason: "not an OpenAI route the engine serves", ...(advice ? { advice } : {}) };
}

/**
 * The inference route a near miss of one meant: written with a trailing slash
 * (`/v1/chat/completions/`, a URL joined by hand), or in other case (`/V1/Chat/Completions`; routes
 * are case-sensitive, as vLLM's are). Found by an outside tester: both were told only "not an OpenAI
 * route the engine serves", though vLLM itself redirects the first to the route.
 */
export function nearRoute(path: string): string | undefined {
  const trimmed = path.length > 1 && path.endsWith("/") ? path.slice(0, -1) : path;
  if (trimmed !== path && engineRoutes.has(trimmed))
    return `did you mean POST ${trimmed}, without the trailing slash?`;
  const lower = trimmed.toLowerCase();
  if (lower !== path && engineRoutes.has(lower))
    return `did you mean POST ${lower}? Routes are case-sensitive${trimmed !== path ? ", and take no trailing slash" : ""}.`;
  return undefined;
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
