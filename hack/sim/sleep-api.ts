/**
 * vLLM's development endpoints for sleep mode, with vLLM 0.33's answers:
 * `{"status": "sleeping", "level": n}` from `/sleep` (its `level` and `mode`
 * read as FastAPI reads query parameters: an integer from 0 to 2, one of the
 * pause modes, else its validation error), `{"status": "awake"|"sleeping",
 * "tags": [...]|null}` from `/wake_up`, `{"is_sleeping": bool}`,
 * `{"success": bool}` from `/reset_prefix_cache`, and `{"results": [...]}` from
 * `/collective_rpc`.
 * vLLM only mounts them with `VLLM_SERVER_DEV_MODE=1`; the router also asks
 * for `--enable-sleep-mode` before it mounts the sleep ones.
 */
import { laxBool } from "../../lib/lax-bool.ts";
import type { PauseMode, SimEngine } from "./engine.ts";
import { httpException, internalError, pythonRepr, type SchemaIssue, schemaError } from "./vllm-error.ts";

export interface DevAnswer {
  status: number;
  json?: unknown;
}

const pauseModes: readonly string[] = ["abort", "wait", "keep"];
const expectedModes = "'abort', 'wait' or 'keep'";

/** `POST /sleep?level=1&mode=abort` (vLLM's defaults). */
export async function sleepEndpoint(engine: SimEngine, query: URLSearchParams): Promise<DevAnswer> {
  const levelText = query.get("level") ?? "1";
  const mode = query.get("mode") ?? "abort";
  const issues: SchemaIssue[] = [];
  const level = Number.parseInt(levelText, 10);
  if (!/^\s*[-+]?\d+\s*$/.test(levelText))
    issues.push({
      type: "int_parsing",
      loc: "query.level",
      msg: "Input should be a valid integer, unable to parse string as an integer",
      input: levelText,
    });
  else if (level < 0)
    issues.push({
      type: "greater_than_equal",
      loc: "query.level",
      msg: "Input should be greater than or equal to 0",
      input: levelText,
      ctx: "{'ge': 0}",
    });
  else if (level > 2)
    issues.push({
      type: "less_than_equal",
      loc: "query.level",
      msg: "Input should be less than or equal to 2",
      input: levelText,
      ctx: "{'le': 2}",
    });
  if (!pauseModes.includes(mode))
    issues.push({
      type: "literal_error",
      loc: "query.mode",
      msg: `Input should be ${expectedModes}`,
      input: mode,
      ctx: `{'expected': ${pythonRepr(expectedModes)}}`,
    });
  if (issues.length > 0) throw schemaError(issues);
  await engine.sleep(level, mode as PauseMode);
  return { status: 200, json: { status: "sleeping", level } };
}

/** `POST /wake_up[?tags=weights&tags=kv_cache]`: "sleeping" while a part still sleeps. */
export async function wakeUpEndpoint(engine: SimEngine, query: URLSearchParams): Promise<DevAnswer> {
  const tags = query.getAll("tags");
  await engine.wake(tags.length === 0 ? undefined : tags);
  return {
    status: 200,
    json: { status: engine.isSleeping ? "sleeping" : "awake", tags: tags.length === 0 ? null : tags },
  };
}

/** `GET /is_sleeping`. */
export async function isSleepingEndpoint(engine: SimEngine): Promise<DevAnswer> {
  return { status: 200, json: { is_sleeping: await engine.isSleepingWhenIdle() } };
}

/** `POST /collective_rpc {"method": "reload_weights"}`: one result per worker (one here). */
export async function collectiveRpcEndpoint(engine: SimEngine, rawBody: string): Promise<DevAnswer> {
  let body: unknown;
  try {
    body = JSON.parse(rawBody);
  } catch (error) {
    throw httpException(400, `JSON decode error: ${(error as Error).message}`);
  }
  if (!body || typeof body !== "object" || Array.isArray(body))
    throw httpException(400, "Request body must be a JSON object");
  const method = (body as { method?: unknown }).method;
  if (method === undefined || method === null) throw httpException(400, "Missing 'method' in request body");
  if (method !== "reload_weights") {
    throw internalError(
      `AttributeError: 'Worker' object has no attribute '${String(method)}' [snooze sim: only reload_weights is simulated]`,
    );
  }
  await engine.reloadWeights();
  return { status: 200, json: { results: [null] } };
}

/**
 * `POST /reset_prefix_cache[?reset_running_requests=true]`: vLLM's reset fails (`success:
 * false`, for the caller to retry) while running requests hold cache blocks, unless told to
 * reset those too.
 */
export async function resetPrefixCacheEndpoint(
  engine: SimEngine,
  query: URLSearchParams,
): Promise<DevAnswer> {
  const resetRunning = laxBool(query.get("reset_running_requests") ?? "false") === true;
  await engine.resetPrefixCache();
  return { status: 200, json: { success: resetRunning || engine.gauges().running === 0 } };
}
