/**
 * One simulated engine behind its own `node:http` server, like one `vllm serve`
 * process: the port opens only when loading is done. `startSim` is the
 * programmatic entry point for tests and benchmarks; the CLI uses it too.
 */
import { randomUUID } from "node:crypto";
import type * as http from "node:http";
import type { AddressInfo } from "node:net";
import { type Logger, silentLogger } from "../../lib/log.ts";
import { http as nodeHttp } from "../../lib/node-http.ts";
import * as admin from "./admin.ts";
import { AbortedError } from "./delay.ts";
import { SimEngine } from "./engine.ts";
import { requireJsonMediaType } from "./json-media-type.ts";
import { modelList, serveGeneration } from "./openai-handler.ts";
import { type ApiKind, parseOpenAIRequest } from "./openai-request.ts";
import { resolveSimOptions, type SimOptions } from "./options.ts";
import { ResponseStore } from "./response-store.ts";
import { cancelResponse, retrieveResponse, serveResponse } from "./responses-handler.ts";
import { parseResponsesRequest } from "./responses-request.ts";
import { simVersion } from "./sim-version.ts";
import * as sleepApi from "./sleep-api.ts";
import { detokenize, tokenize } from "./tokenize-api.ts";
import { SimTokenizer } from "./tokenizer.ts";
import { streamTranscription, transcribe } from "./transcription.ts";
import { internalError, methodNotAllowed, notFoundRoute, VllmHttpError } from "./vllm-error.ts";

export { simVersion } from "./sim-version.ts";

const maxBodyBytes = 32 * 1024 * 1024;

export interface SimHandle {
  readonly engine: SimEngine;
  /** `http://host:port`; the port is known once listening when 0 was asked. */
  readonly url: string;
  readonly port: number;
  /** Resolves when the port is open (after the load time); rejects if listening fails. */
  readonly ready: Promise<void>;
  /** Resolves with the reason when the engine dies (a fault or `/sim/crash`). */
  readonly died: Promise<string>;
  /** Stops the engine, releases its GPU memory and closes every connection. */
  close(): Promise<void>;
  /**
   * A graceful stop, as uvicorn's on SIGTERM: no new connections, in-flight
   * requests finish (parked ones wait for a wake), then `close()`.
   */
  drain(): Promise<void>;
}

export interface StartSimSettings {
  /** Wait until the port is open before resolving (default true). */
  waitReady?: boolean;
  logger?: Logger;
}

/**
 * Starts one simulated engine. Throws SimStartError at once when its GPU has no
 * room (vLLM's start-up failure); otherwise the port opens after the load time.
 */
export async function startSim(
  options: Partial<SimOptions> = {},
  settings: StartSimSettings = {},
): Promise<SimHandle> {
  const resolved = resolveSimOptions(options);
  const logger = (settings.logger ?? silentLogger).child({
    model: resolved.servedModelNames[0],
    port: resolved.port,
  });
  const engine = new SimEngine(resolved, logger);
  try {
    engine.claimGpu();
  } catch (error) {
    engine.close();
    throw error;
  }

  let inFlight = 0;
  let draining = false;
  let drained: (() => void) | undefined;
  const server = nodeHttp.createServer((req, res) => {
    inFlight += 1;
    if (draining) res.shouldKeepAlive = false;
    // vLLM's XRequestIdMiddleware: on every answer, whatever writes its head.
    if (resolved.requestIdHeaders)
      res.setHeader("x-request-id", req.headers["x-request-id"] ?? randomUUID().replaceAll("-", ""));
    res.once("close", () => {
      inFlight -= 1;
      if (inFlight === 0) drained?.();
    });
    handleRequest(engine, req, res).catch((error) => {
      logger.error("request failed", { error });
      if (!res.headersSent) send(res, 500, internalError(String(error)).body);
      else res.destroy();
    });
  });
  server.keepAliveTimeout = 5_000;
  let port = resolved.port;

  let closing: Promise<void> | undefined;
  const shutDown = () => {
    closing ??= new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
      if (!server.listening) resolve();
    });
    return closing;
  };

  let markDied!: (reason: string) => void;
  const died = new Promise<string>((resolve) => {
    markDied = resolve;
  });
  engine.onDeath((reason) => {
    void shutDown();
    markDied(reason);
  });

  const ready = (async () => {
    logger.info("loading", { loadTimeMs: engine.scaled(resolved.loadTimeMs) });
    await engine.load();
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      // vLLM's server (uvicorn) accepts a backlog of 2048; Node's default of 511 drops a burst.
      server.listen({ port: resolved.port, host: resolved.host, backlog: 2048 }, () => {
        server.off("error", reject);
        resolve();
      });
    });
    port = (server.address() as AddressInfo).port;
    logger.info("listening", { url: `http://${hostForUrl(resolved.host)}:${port}` });
  })();
  // A close during loading rejects `ready` with AbortedError; nobody has to wait for it.
  ready.catch(() => {});

  const simHandle: SimHandle = {
    engine,
    get url() {
      return `http://${hostForUrl(resolved.host)}:${port}`;
    },
    get port() {
      return port;
    },
    ready,
    died,
    async close() {
      engine.close();
      await shutDown();
    },
    async drain() {
      draining = true;
      if (server.listening) {
        server.close();
        server.closeIdleConnections();
        if (inFlight > 0) await new Promise<void>((resolve) => (drained = resolve));
      }
      await simHandle.close();
    },
  };
  if (settings.waitReady ?? true) {
    try {
      await ready;
    } catch (error) {
      await simHandle.close();
      throw error;
    }
  }
  return simHandle;
}

function hostForUrl(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::") return "[::1]";
  return host.includes(":") ? `[${host}]` : host;
}

type Route = (engine: SimEngine, context: RequestContext) => Promise<void> | void;

interface RequestContext {
  req: http.IncomingMessage;
  res: http.ServerResponse;
  query: URLSearchParams;
  body: () => Promise<string>;
  /** The body as bytes (a form upload). */
  bytes: () => Promise<Buffer>;
}

const json = (answer: { status: number; json?: unknown }) => (context: RequestContext) =>
  send(context.res, answer.status, answer.json);

function routes(engine: SimEngine): Record<string, Partial<Record<string, Route>>> {
  // vLLM's `load_aware_call`: a request counts from its handler's start until its answer is sent.
  let serverLoad = 0;
  const loadAware = (route: Route): Route => {
    if (!engine.options.enableServerLoadTracking) return route;
    return (e, context) => {
      serverLoad += 1;
      context.res.once("close", () => {
        serverLoad -= 1;
      });
      return route(e, context);
    };
  };
  const generation = (kind: ApiKind) => async (_engine: SimEngine, context: RequestContext) => {
    const body = await context.body();
    requireJsonMediaType(context.req.headers, body);
    const request = parseOpenAIRequest(
      kind,
      body,
      engine.options.servedModelNames,
      engine.options.maxModelLen,
      // vLLM has a tool parser only with both flags (its ParserManager).
      engine.options.enableAutoToolChoice && engine.options.toolCallParser !== undefined,
    );
    if (engine.faults.dropConnection > 0) {
      engine.faults.dropConnection -= 1;
      context.req.socket.resetAndDestroy();
      return;
    }
    await serveGeneration(engine, request, context.req, context.res);
  };
  const tokenizer = new SimTokenizer();
  const { servedModelNames, maxModelLen } = engine.options;
  const tokenization = async (context: RequestContext, answer: (body: string) => unknown) => {
    const body = await context.body();
    requireJsonMediaType(context.req.headers, body);
    send(context.res, 200, answer(body));
  };
  const store = engine.options.responsesStore ? new ResponseStore() : undefined;
  if (store) stores.set(engine, store);
  const responses = async (_engine: SimEngine, context: RequestContext) => {
    const body = await context.body();
    requireJsonMediaType(context.req.headers, body);
    const request = parseResponsesRequest(
      body,
      engine.options.servedModelNames,
      engine.options.maxModelLen,
      store !== undefined,
    );
    await serveResponse(engine, request, context.req, context.res, store);
  };
  const transcription =
    (kind: "transcription" | "translation") => async (engine: SimEngine, context: RequestContext) => {
      const answer = transcribe(
        await context.bytes(),
        context.req.headers["content-type"],
        engine.options.servedModelNames,
      );
      if (answer.stream) streamTranscription(context.res, answer, kind);
      else send(context.res, 200, { text: answer.text });
    };
  const table: Record<string, Partial<Record<string, Route>>> = {
    "/health": { GET: (_e, c) => send(c.res, 200) },
    "/ping": { GET: (_e, c) => send(c.res, 200), POST: (_e, c) => send(c.res, 200) },
    "/version": { GET: (_e, c) => send(c.res, 200, { version: simVersion }) },
    "/load": { GET: (_e, c) => send(c.res, 200, { server_load: serverLoad }) },
    "/metrics": {
      GET: (e, c) => {
        const text = e.metrics.render(e.modelName, "0", e.gauges());
        c.res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" });
        c.res.end(text);
      },
    },
    "/v1/models": { GET: (e, c) => send(c.res, 200, modelList(e)) },
    "/v1/chat/completions": { POST: loadAware(generation("chat")) },
    "/v1/completions": { POST: loadAware(generation("completion")) },
    "/v1/responses": { POST: loadAware(responses) },
    "/tokenize": {
      POST: (_e, c) => tokenization(c, (body) => tokenize(tokenizer, body, servedModelNames, maxModelLen)),
    },
    "/detokenize": {
      POST: (_e, c) => tokenization(c, (body) => detokenize(tokenizer, body, servedModelNames)),
    },
    "/v1/audio/transcriptions": { POST: loadAware(transcription("transcription")) },
    "/v1/audio/translations": { POST: loadAware(transcription("translation")) },
    "/sim/faults": {
      GET: (e, c) => json(admin.getFaults(e))(c),
      POST: async (e, c) => json(admin.postFaults(e, await c.body()))(c),
    },
    "/sim/state": { GET: (e, c) => json(admin.getState(e))(c) },
    "/sim/crash": { POST: (e, c) => json(admin.postCrash(e))(c) },
  };
  if (engine.options.devMode) {
    table["/collective_rpc"] = {
      POST: async (e, c) => json(await sleepApi.collectiveRpcEndpoint(e, await c.body()))(c),
    };
    table["/reset_prefix_cache"] = {
      POST: async (e, c) => json(await sleepApi.resetPrefixCacheEndpoint(e, c.query))(c),
    };
    // Caches the simulator does not have: vLLM resets them and answers an empty 200.
    table["/reset_mm_cache"] = { POST: (_e, c) => send(c.res, 200) };
    table["/reset_encoder_cache"] = { POST: (_e, c) => send(c.res, 200) };
    if (engine.options.enableSleepMode) {
      table["/sleep"] = { POST: async (e, c) => json(await sleepApi.sleepEndpoint(e, c.query))(c) };
      table["/wake_up"] = { POST: async (e, c) => json(await sleepApi.wakeUpEndpoint(e, c.query))(c) };
      table["/is_sleeping"] = { GET: async (e, c) => json(await sleepApi.isSleepingEndpoint(e))(c) };
    }
  }
  return table;
}

const routeTables = new WeakMap<SimEngine, ReturnType<typeof routes>>();
/** Each engine's response store, when it has one (`routes` makes it). */
const stores = new WeakMap<SimEngine, ResponseStore>();

async function handleRequest(
  engine: SimEngine,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  let table = routeTables.get(engine);
  if (!table) {
    table = routes(engine);
    routeTables.set(engine, table);
  }
  engine.countRequest(req.method ?? "GET", req.url ?? "/");
  const url = new URL(req.url ?? "/", "http://sim");
  const context: RequestContext = {
    req,
    res,
    query: url.searchParams,
    body: async () => (await readBody(req)).toString("utf8"),
    bytes: () => readBody(req),
  };
  if (!authorized(engine.options.apiKey, url.pathname, req)) {
    // vLLM's AuthenticationMiddleware: only paths under /v1, never a CORS preflight, its own body.
    send(res, 401, { error: "Unauthorized" });
    return;
  }
  try {
    const methods = table[url.pathname] ?? storedResponseRoutes(url.pathname, stores.get(engine));
    if (!methods) throw notFoundRoute();
    const route = methods[req.method ?? "GET"] ?? (req.method === "HEAD" ? methods.GET : undefined);
    if (!route) throw methodNotAllowed();
    await route(engine, context);
  } catch (error) {
    if (error instanceof VllmHttpError) {
      if (!res.headersSent) send(res, error.status, error.body);
      return;
    }
    if (error instanceof AbortedError) {
      // The engine died or closed while this request waited: the connection goes with it.
      res.destroy();
      return;
    }
    throw error;
  }
}

/**
 * vLLM's routes of a stored response: retrieve it, cancel a background one. Without a store
 * (`VLLM_ENABLE_RESPONSES_API_STORE`) it keeps none, so each names one it does not have.
 */
function storedResponseRoutes(
  path: string,
  store: ResponseStore | undefined,
): Partial<Record<string, Route>> | undefined {
  const match = /^\/v1\/responses\/([^/]+)(\/cancel)?$/.exec(path);
  if (!match) return undefined;
  let id = match[1]!;
  try {
    id = decodeURIComponent(id);
  } catch {}
  if (match[2] === "/cancel") return { POST: (_e, c) => send(c.res, 200, cancelResponse(store, id)) };
  return { GET: (_e, c) => send(c.res, 200, retrieveResponse(store, id, c.query)) };
}

/** Whether a request passes vLLM's `--api-key` check: `Authorization: Bearer <key>` under `/v1`. */
function authorized(apiKey: string | undefined, path: string, req: http.IncomingMessage): boolean {
  if (!apiKey || !path.startsWith("/v1") || req.method === "OPTIONS") return true;
  const [scheme, token] = (req.headers.authorization ?? "").split(" ", 2);
  return scheme?.toLowerCase() === "bearer" && token === apiKey;
}

function send(res: http.ServerResponse, status: number, body?: unknown): void {
  if (body === undefined) {
    res.writeHead(status, { "content-length": 0 });
    res.end();
    return;
  }
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}

function readBody(req: http.IncomingMessage): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on("data", (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBodyBytes) {
        reject(new VllmHttpError(413, { detail: "Request Entity Too Large" }));
        req.destroy();
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => resolve(Buffer.concat(chunks)));
    req.on("error", reject);
  });
}
