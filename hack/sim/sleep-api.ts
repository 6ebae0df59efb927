/**
 * vLLM's development endpoints for sleep mode, with vLLM's answers: `200` and
 * an empty body for `/sleep`, `/wake_up` and `/reset_prefix_cache`,
 * `{"is_sleeping": bool}`, and `{"results": [...]}` from `/collective_rpc`.
 * vLLM only mounts them with `VLLM_SERVER_DEV_MODE=1`; the router also asks
 * for `--enable-sleep-mode` before it mounts the sleep ones.
 */
import type { PauseMode, SimEngine } from "./engine.ts";
import { badRequest, httpException, internalError } from "./vllm-error.ts";

export interface DevAnswer {
  status: number;
  json?: unknown;
}

const pauseModes: readonly string[] = ["abort", "wait", "keep"];

/** `POST /sleep?level=1&mode=abort` (vLLM's defaults). */
export async function sleepEndpoint(engine: SimEngine, query: URLSearchParams): Promise<DevAnswer> {
  const levelText = query.get("level") ?? "1";
  const mode = query.get("mode") ?? "abort";
  // vLLM runs int(level): a ValueError, which its handler turns into a 400.
  if (!/^\s*[-+]?\d+\s*$/.test(levelText)) {
    throw badRequest(`invalid literal for int() with base 10: '${levelText}'`);
  }
  if (!pauseModes.includes(mode)) throw badRequest(`Invalid pause mode: ${mode}`);
  await engine.sleep(Number(levelText), mode as PauseMode);
  return { status: 200 };
}

/** `POST /wake_up[?tags=weights&tags=kv_cache]`. */
export async function wakeUpEndpoint(engine: SimEngine, query: URLSearchParams): Promise<DevAnswer> {
  const tags = query.getAll("tags");
  await engine.wake(tags.length === 0 ? undefined : tags);
  return { status: 200 };
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
  const method = body && typeof body === "object" ? (body as { method?: unknown }).method : undefined;
  if (method === undefined || method === null) throw httpException(400, "Missing 'method' in request body");
  if (method !== "reload_weights") {
    throw internalError(
      `AttributeError: 'Worker' object has no attribute '${String(method)}' [snooze sim: only reload_weights is simulated]`,
    );
  }
  await engine.reloadWeights();
  return { status: 200, json: { results: [null] } };
}

/** `POST /reset_prefix_cache`. */
export async function resetPrefixCacheEndpoint(engine: SimEngine): Promise<DevAnswer> {
  await engine.resetPrefixCache();
  return { status: 200 };
}
