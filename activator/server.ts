import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { type Context, context, type Span, SpanStatusCode } from "@opentelemetry/api";
import { clip } from "../lib/clip.ts";
import { answerClientErrors, endSocketWithError } from "../lib/http/client-error.ts";
import { deferContinue } from "../lib/http/continue.ts";
import { sendError, sendJson } from "../lib/http/json.ts";
import { toOriginForm } from "../lib/http/origin-form.ts";
import { decodeSegment, malformedSegment } from "../lib/http/path-segment.ts";
import { inTurn } from "../lib/http/pipeline.ts";
import { requestIdOf } from "../lib/http/request-id.ts";
import { probeHashHeader, probeHeader, probeValue } from "../lib/knative/ingress-class.ts";
import type { Logger } from "../lib/log.ts";
import { http } from "../lib/node-http.ts";
import { openAIError } from "../lib/openai-error.ts";
import type { Registry } from "../lib/prometheus.ts";
import { type Activator, sendShuttingDown } from "./activator.ts";
import {
  type AdminActions,
  AdminActionUnfinished,
  type AdminModelView,
  SleepStoppedInstead,
} from "./admin.ts";
import { adminRefusal, senderToken } from "./admin-guard.ts";
import { CorsPolicy } from "./cors.ts";
import { engineOwnRoute } from "./engine-own-routes.ts";
import type { EventSenders } from "./event-senders.ts";
import { handleIncomingEvents, RecentEvents } from "./incoming-event.ts";
import { hintForMs, ListingHints } from "./listing-hint.ts";
import { engineRoutes, forActivator, nearRoute } from "./openai-path.ts";
import { startServerSpan } from "./request-trace.ts";
import { extendView, logsPath, statusPageRoutes } from "./status-page.ts";
import { Timeline } from "./timeline.ts";
import { removedModel, unknownModel } from "./unknown-model.ts";

export interface ServerOptions {
  activator: Activator;
  admin: AdminActions;
  registry: Registry;
  /**
   * The bearer token the admin API and the events endpoint require; absent: open to local callers
   * only (the commands refuse a non-loopback bind without one). See admin-guard.ts.
   */
  adminToken?: string;
  /** Origins whose browser pages may call `/v1/` (`*`: any); none by default (cors.ts). */
  allowedOrigins?: readonly string[];
  /** Who else may send events, by a token of their own (Kubernetes: kube-event-senders.ts). */
  eventSenders?: EventSenders;
  /** Where the events endpoint says what it refused or could not do (the activator's log). */
  log?: Logger;
}

const created = Math.floor(Date.now() / 1000);

// The model's name is everything between `models/` and the verb, slashes included: vLLM serves a
// model under its Hugging Face id (`meta-llama/Llama-3.1-8B`), which a person types as it is, as
// `/v1/models/{model}` takes it; percent-encoded (`%2F`, as the CLI sends it) it is read the same.
const adminAction = /^\/snooze\/v1\/models\/(.+)\/(wake|sleep|stop)$/;
/**
 * The methods of the fixed routes below; any other method is `405` with `Allow`. A route read with
 * GET takes HEAD too (RFC 9110 §9.3.2), but for the event stream, which has no end to measure.
 */
export const methodsOf: ReadonlyMap<string, string> = new Map([
  ["/", "GET, HEAD"],
  ["/ui", "GET, HEAD"],
  ["/ui/", "GET, HEAD"],
  ["/favicon.ico", "GET, HEAD"],
  ["/snooze/v1/timeline", "GET, HEAD"],
  ["/snooze/v1/events/stream", "GET"],
  ["/snooze/v1/models", "GET, HEAD"],
  ["/snooze/v1/slots", "GET, HEAD"],
  ["/snooze/v1/events", "POST"],
  ["/metrics", "GET, HEAD"],
  ["/healthz", "GET, HEAD"],
  ["/readyz", "GET, HEAD"],
]);

/**
 * Waits for `work` (a sleep or stop, an incoming event's action); should Snooze begin to shut down
 * first, answers 503 `shutting_down` at once (the shutdown stops every engine anyway) rather than
 * leave the caller to a connection cut when the server closes. False when it answered so.
 */
async function unlessShutdown(res: ServerResponse, stopping: AbortSignal, work: Promise<unknown>) {
  const { promise: shutdown, resolve } = Promise.withResolvers<"shutdown">();
  const onStop = () => resolve("shutdown");
  if (stopping.aborted) onStop();
  else stopping.addEventListener("abort", onStop, { once: true });
  try {
    if ((await Promise.race([work, shutdown])) !== "shutdown") return true;
  } finally {
    stopping.removeEventListener("abort", onStop);
  }
  void work.catch(() => {});
  sendShuttingDown(res, "Snooze is shutting down and stops every engine; this action did not finish.");
  return false;
}

/** How many Host headers the request carries (Node's `headers` keeps only the first). */
function hostHeaders(req: IncomingMessage): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.length === 4 && req.rawHeaders[i]!.toLowerCase() === "host") count++;
  return count;
}

/**
 * `/v1/models` and `/v1/models/{model}` as written (one segment, not `.` or `..`): the routes that
 * take GET and HEAD only. A path with dot-segments goes on to the activator, which normalises it.
 */
const modelsPath = /^\/v1\/models(\/(?!\.\.?$)[^/]*)?$/;

/** GET, or HEAD: the same answer without its body (Node's response drops the body of a HEAD). */
const reads = (req: IncomingMessage) => req.method === "GET" || req.method === "HEAD";

/**
 * The route of an admin request that has a SERVER span (the model as `{model}`, never the client's
 * text): an event delivery and a model's wake, sleep or stop.
 */
function tracedAdminRoute(method: string | undefined, path: string): string | undefined {
  if (method !== "POST") return undefined;
  if (path === "/snooze/v1/events") return path;
  const action = adminAction.exec(path);
  return action ? `/snooze/v1/models/{model}/${action[2]}` : undefined;
}

/** Ends an admin request's SERVER span with what was answered. */
async function inAdminSpan(
  req: IncomingMessage,
  res: ServerResponse,
  route: string,
  path: string,
  handle: (ctx: Context) => Promise<void>,
): Promise<void> {
  const { span, ctx } = startServerSpan(req, route, path);
  try {
    await handle(ctx);
  } catch (error) {
    span.recordException(error as Error);
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    if (res.headersSent) {
      span.setAttribute("http.response.status_code", res.statusCode);
      if (res.statusCode >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
    }
    span.end();
  }
}

/**
 * Ends the SERVER span of a /v1 request Snooze answers itself (the model list): a client's
 * `models.list()` is in its trace as a chat request is, and counted in snooze_requests_total too.
 */
function answered(span: Span, status: number): void {
  span.setAttribute("http.response.status_code", status);
  span.end();
}

/**
 * The activator's HTTP surface: OpenAI routes under /v1/, the admin API under
 * /snooze/v1/, Prometheus at /metrics, and probes.
 */
export function createActivatorServer({
  activator,
  admin,
  registry,
  adminToken,
  allowedOrigins = [],
  eventSenders,
  log,
}: ServerOptions): Server {
  const cors = new CorsPolicy(allowedOrigins);
  // Event ids already taken, so a Broker's redelivery is not acted on twice.
  const recentEvents = new RecentEvents();
  // What the control plane did, for the status page: kept from the replica events this activator follows.
  const timeline = new Timeline({
    slotOf: (id) => activator.routes.get(id)?.config.slot,
    addedAt: (id) => activator.routes.get(id)?.addedAt,
    listed: (id) => activator.routes.has(id),
    slots: () => admin.slots(),
  });
  const unwatch = activator.watch((event) => timeline.observe(event));
  // A model added or removed, a reload refused or made good: the status page reads the model list
  // (and its banner) again at once, once for all the changes of one turn (a reload makes several).
  let listNoted = false;
  const noteList = () => {
    if (listNoted) return;
    listNoted = true;
    setImmediate(() => {
      listNoted = false;
      timeline.modelsChanged();
    });
  };
  const unwatchList = activator.onModelListChange(noteList);
  const unwatchReloads = admin.onReloadFailure?.(noteList);
  const statusRoutes = statusPageRoutes({
    activator,
    admin,
    timeline,
    tokenRequired: adminToken !== undefined,
  });
  // A client listing the models hints that it is about to use one (listing-hint.ts): a short
  // prewarm within the model's budget, rate-limited so a listing never wakes everything.
  const hints = new ListingHints();
  // `caller`: the listing's context. A prewarm it causes continues its trace, as an event's or a
  // person's wake does (found by an outside tester: the hint's wake began a trace of its own, and
  // the listing's trace showed nothing of the wake it caused).
  const hint = (caller: Context, named?: string) => {
    const prewarm = admin.prewarm;
    // None during the shutdown: its engine would be started only to be stopped (found by a probe).
    if (!prewarm || activator.shutdownSignal.aborted) return;
    const candidates = [...activator.routes.values()].map((route) => ({
      id: route.config.id,
      tier: route.tier,
      lastActive: route.lastActive,
      prewarmBudget: route.config.prewarmBudget,
    }));
    // A hint that fails costs nothing: the request it announced activates the model as usual.
    const now = Date.now();
    for (const id of hints.take(now, candidates, named))
      void prewarm(id, hintForMs, { hint: true, caller })
        .then(({ keptMs }) => {
          if (keptMs === 0) hints.giveBack(id, now);
        })
        .catch(() => {});
  };
  const views = (): AdminModelView[] => {
    const slotWaits = activator.slotWaits();
    return [...activator.routes.values()].map((route) => {
      const event = route.latestEvent;
      const backoff = route.backoff();
      const slotWait = slotWaits.get(route.config.id);
      const view: AdminModelView = {
        id: route.config.id,
        aliases: route.config.aliases,
        tier: route.tier,
        // No event spoke of it yet: cold since it was added (by a reload), else since the timeline
        // began (the status page compares the two).
        since: new Date(event?.since ?? Math.max(timeline.startedAt, route.addedAt)).toISOString(),
        replicas: route.replicas(),
        held: route.held,
        inFlight: route.inFlight,
        slot: route.config.slot,
        ...(backoff ? { retryAt: new Date(backoff.retryAt).toISOString() } : {}),
        ...(slotWait ? { slotWait: slotWait.reason } : {}),
        ...admin.details(route.config.id),
      };
      return extendView(view, route, timeline);
    });
  };
  const modelObject = (view: AdminModelView) => ({
    id: view.id,
    object: "model",
    created,
    owned_by: "snooze",
    snooze: {
      tier: view.tier,
      aliases: view.aliases,
      held: view.held,
      in_flight: view.inFlight,
      slot: view.slot,
    },
  });

  const handler = async (req: IncomingMessage, res: ServerResponse) => {
    // An upgrade Snooze does not make: Node reads nothing more from the connection after it (the
    // bytes are the new protocol's), so a request pipelined behind it would wait unanswered until
    // the keep-alive timeout (found by an outside tester). Its answer closes the connection. So does
    // every answer once Snooze is leaving: a client's next request opens a connection, which the
    // Service sends to another replica.
    if (asksUpgrade(req) || activator.leaving) res.setHeader("connection", "close");
    if (req.httpVersionMajor > 1) {
      // Node's parser takes `HTTP/2.0` in a request line (an HTTP/2 connection's preface is refused
      // before this: lib/http/client-error.ts); such a request is no HTTP/1.x one to be routed.
      // RFC 9110 §15.6.6: the major version is not supported.
      req.resume();
      sendError(
        res,
        505,
        openAIError(
          `HTTP/${req.httpVersion} is not served here: Snooze speaks HTTP/1.1 (and 1.0).`,
          "invalid_request_error",
          "http_version_not_supported",
        ),
        { connection: "close" },
      );
      activator.countRefused(505);
      return;
    }
    const badTarget = toOriginForm(req);
    if (badTarget) {
      req.resume();
      sendError(
        res,
        400,
        openAIError(
          `The request target ${badTarget}. Send the path (e.g. /v1/chat/completions).`,
          "invalid_request_error",
          "invalid_request_target",
        ),
        { connection: "close" },
      );
      activator.countRefused(400);
      return;
    }
    if (hostHeaders(req) > 1) {
      // RFC 9112 §3.2: more than one Host is refused (Node keeps the first): routing by Host, the
      // admin API's loopback check and Knative's routes would each read one of two stories.
      req.resume();
      sendError(
        res,
        400,
        openAIError(
          "The request has more than one Host header; send one.",
          "invalid_request_error",
          "duplicate_host",
        ),
        { connection: "close" },
      );
      activator.countRefused(400);
      return;
    }
    if (req.headers.host === undefined && req.httpVersion === "1.1") {
      // RFC 9112 §3.2: a 1.1 request without Host is refused (Node would say so with an empty 400).
      req.resume();
      sendError(
        res,
        400,
        openAIError(
          "The request has no Host header, which HTTP/1.1 requires.",
          "invalid_request_error",
          "missing_host",
        ),
        { connection: "close" },
      );
      activator.countRefused(400);
      return;
    }
    if (req.url === "*") {
      // `OPTIONS *` (RFC 9110 §9.3.7): what the server as a whole takes, asked by some load
      // balancers and proxies to check that it answers.
      req.resume();
      res.writeHead(204, { allow: "GET, HEAD, POST, OPTIONS" });
      res.end();
      return;
    }
    const path = (req.url ?? "/").split("?")[0]!;
    if (activator.hosts && req.headers[probeHeader] === probeValue) {
      // Knative's readiness probe: which version of this host's KIngress this activator routes.
      req.resume();
      const version = activator.hosts.version(req.headers.host);
      if (version) {
        res.writeHead(200, { [probeHashHeader]: version, "content-type": "text/plain" });
        res.end("ok");
      } else
        sendError(
          res,
          404,
          openAIError(
            `No KIngress routes the host ${req.headers.host ?? ""}.`,
            "invalid_request_error",
            "host_not_found",
          ),
        );
      return;
    }
    if (forActivator(path)) {
      if (CorsPolicy.isPreflight(req.method, req.headers)) {
        req.resume();
        const answer = cors.preflight(req.headers);
        if (answer.status === 403) sendError(res, 403, answer.body);
        else {
          res.writeHead(204, answer.headers);
          res.end();
        }
        // Counted as every request to /v1/ is (found by an outside tester: preflights were not).
        activator.countAnswered("", answer.status);
        return;
      }
      const refused = cors.refusal(req.headers);
      if (refused) {
        req.resume();
        sendError(res, 403, refused);
        activator.countRefused(403);
        return;
      }
      const allowed = cors.enabled ? cors.allowOrigin(req.headers.origin) : undefined;
      if (allowed) {
        res.setHeader("access-control-allow-origin", allowed);
        // A page sees only CORS-safelisted headers unless told: OpenAI's SDK in a browser would retry
        // a 503 at once instead of after its Retry-After, and retry an upstream_died it must not;
        // and its `request_id` (X-Request-Id: the engine's, or hold progress's) would be null.
        res.setHeader("access-control-expose-headers", "Retry-After, X-Should-Retry, X-Request-Id");
        res.setHeader("vary", "Origin");
      }
    }
    if (path === "/v1/models" && reads(req)) {
      const { span, ctx } = startServerSpan(req, "/v1/models", path);
      sendJson(res, 200, { object: "list", data: views().map(modelObject) });
      activator.countAnswered("", 200);
      answered(span, 200);
      // A HEAD is a check, not a client about to use a model.
      if (req.method === "GET") hint(ctx);
      return;
    }
    if (modelsPath.test(path) && !reads(req)) {
      const { span } = startServerSpan(req, path === "/v1/models" ? path : "/v1/models/{model}", path);
      // The listing is read-only (found by an outside tester: a PUT was `404 not_found`).
      sendError(
        res,
        405,
        openAIError(
          `${clip(path)} takes GET, HEAD, not ${req.method}.`,
          "invalid_request_error",
          "method_not_allowed",
        ),
        { allow: "GET, HEAD" },
      );
      activator.countAnswered("", 405);
      answered(span, 405);
      return;
    }
    if (path === "/v1/models/" && reads(req)) {
      const { span } = startServerSpan(req, "/v1/models/{model}", path);
      // Not a model named `` (found by an outside tester: "The model `` does not exist").
      sendError(
        res,
        400,
        openAIError(
          "The path names no model: GET /v1/models/{model} takes a model's id or alias after the slash (GET /v1/models lists them).",
          "invalid_request_error",
          "missing_model",
          "model",
        ),
      );
      activator.countAnswered("", 400);
      answered(span, 400);
      return;
    }
    if (path.startsWith("/v1/models/") && reads(req)) {
      const { span, ctx } = startServerSpan(req, "/v1/models/{model}", path);
      const segment = path.slice("/v1/models/".length);
      const name = decodeSegment(segment);
      if (name === undefined) {
        sendError(res, 400, malformedSegment(segment));
        activator.countAnswered("", 400);
        answered(span, 400);
        return;
      }
      // Named as requests name it: an id or alias, in either Unicode form (activator/resolve-model.ts).
      const id = activator.modelNamed(name);
      const view = id === undefined ? undefined : views().find((v) => v.id === id);
      if (view) {
        sendJson(res, 200, modelObject(view));
        activator.countAnswered(view.id, 200);
        answered(span, 200);
        if (req.method === "GET") hint(ctx, view.id);
      } else {
        sendError(res, 404, unknownModel(name, activator.routes.keys(), activator.modelNames()));
        activator.countAnswered("", 404);
        answered(span, 404);
      }
      return;
    }
    // Returned, not awaited: this frame need not stay suspended for as long as a request is held.
    if (forActivator(path)) return activator.handle(req, res);
    if (path.startsWith("/snooze/")) {
      const refused = adminRefusal(req, adminToken, eventSenders !== undefined);
      if (refused) {
        req.resume();
        // A delivery refused here still shows in its sender's trace: a Broker or Trigger whose token
        // is wrong or missing sees why its events did nothing.
        const route = tracedAdminRoute(req.method, path);
        const span = route ? startServerSpan(req, route, path).span : undefined;
        sendError(res, refused.status, refused.body, refused.headers);
        span?.setAttribute("http.response.status_code", refused.status);
        span?.end();
        return;
      }
    }
    if (await statusRoutes(req, res, path)) return;
    if (path === "/snooze/v1/models" && reads(req)) {
      // During the shutdown Snooze still answers here (`snooze status` says it shuts down). The last
      // reload, while it stands refused: the file on disk is not what runs (local mode).
      const reloadFailure = admin.reloadFailure?.();
      sendJson(res, 200, {
        models: views(),
        slots: await admin.slots(),
        ...(activator.accepting ? {} : { shuttingDown: true }),
        ...(reloadFailure ? { reloadFailure } : {}),
      });
      return;
    }
    if (path === "/snooze/v1/slots" && reads(req)) {
      sendJson(res, 200, { slots: await admin.slots() });
      return;
    }
    const action = adminAction.exec(path);
    // A route that exists, asked with the wrong method: say which one it takes.
    const allow = action ? "POST" : logsPath.test(path) ? "GET, HEAD" : (methodsOf.get(path) ?? "");
    if (allow && !allow.split(", ").includes(req.method ?? "")) {
      sendError(
        res,
        405,
        openAIError(
          `${path} takes ${allow}, not ${req.method}.`,
          "invalid_request_error",
          "method_not_allowed",
        ),
        { allow },
      );
      return;
    }
    let command: { verb: "wake" | "sleep" | "stop"; name: string } | undefined;
    if (action && req.method === "POST") {
      const name = decodeSegment(action[1]!);
      if (name === undefined) {
        sendError(res, 400, malformedSegment(action[1]!));
        return;
      }
      command = { verb: action[2] as "wake" | "sleep" | "stop", name };
    }
    // Found by a probe: a wake asked during the shutdown (the admin API's, or an event's) started
    // an engine, loaded to be stopped seconds later, while sleep and stop were refused.
    if (
      activator.shutdownSignal.aborted &&
      (command || path === "/snooze/v1/events") &&
      req.method === "POST"
    ) {
      sendShuttingDown(res, "Snooze is shutting down and stops every engine; it takes no action now.");
      return;
    }
    if (path === "/snooze/v1/events" && req.method === "POST") {
      // A SERVER span, continuing the delivery's traceparent (a Broker's), as every request's does.
      const sender = senderToken(req, adminToken, eventSenders !== undefined);
      await inAdminSpan(req, res, path, path, async (ctx) => {
        const handled = context.with(ctx, () =>
          handleIncomingEvents(req, res, {
            admin,
            modelNamed: (name) => activator.modelNamed(name),
            knownModels: () => [...activator.routes.keys()],
            recent: recentEvents,
            bodyPace: () => activator.bodyPace(),
            log,
            ...(sender && eventSenders ? { sender: eventSenders.delivery(sender) } : {}),
          }),
        );
        await unlessShutdown(res, activator.shutdownSignal, handled);
      });
      return;
    }
    if (command) {
      const { verb, name } = command;
      // A SERVER span continuing the caller's traceparent, as an event's delivery has: a wake's
      // activation is in the caller's trace (found by an outside tester: a traced wake began a trace
      // of its own, and the call showed nowhere in the caller's). A sleep or stop stays a trace of
      // its own (docs/tracing.md); the call that asked for it is in the caller's.
      await inAdminSpan(req, res, tracedAdminRoute(req.method, path)!, path, async (ctx) => {
        const id = activator.modelNamed(name);
        if (!id) {
          sendError(res, 404, unknownModel(name, activator.routes.keys(), activator.modelNames()));
          return;
        }
        // Who asked is in the log, with the call's trace ids: the tier lines after it name no
        // cause, and a sleep's or stop's are a trace of their own (found by an outside tester: a
        // model woken or stopped by a person looked, in the log, like one that did it by itself).
        context.with(ctx, () => log?.info("asked through the admin API", { model: id, action: verb }));
        // A wake is asynchronous (watch the tier); sleep and stop answer once done.
        if (verb === "wake") void admin.wake(id, { caller: ctx }).catch(() => {});
        else {
          try {
            if (!(await unlessShutdown(res, activator.shutdownSignal, admin[verb](id)))) return;
          } catch (error) {
            if (error instanceof SleepStoppedInstead) {
              sendError(res, 502, openAIError(error.message, "server_error", "action_failed"));
              return;
            }
            if (!(error instanceof AdminActionUnfinished)) throw error;
            sendError(res, 504, openAIError(error.message, "server_error", "action_unfinished"));
            return;
          }
        }
        const route = activator.routes.get(id);
        // Found by a probe: a reload that removed the model while its sleep or stop waited for a
        // drain made this answer a 500 (reading the tier of a route that was gone).
        if (!route) {
          sendError(res, 404, removedModel(id, verb, activator.routes.keys()));
          return;
        }
        sendJson(res, verb === "wake" ? 202 : 200, { model: id, action: verb, tier: route.tier });
      });
      return;
    }
    if (path === "/metrics") {
      const text = await registry.metrics();
      res.writeHead(200, { "content-type": registry.contentType });
      res.end(text);
      return;
    }
    if (path === "/healthz") {
      sendJson(res, 200, { ok: true });
      return;
    }
    if (path === "/readyz") {
      sendJson(res, activator.ready ? 200 : 503, { ready: activator.ready });
      return;
    }
    // The usual slip: an OpenAI client's base URL without its /v1 (http://host:8080), which vLLM's
    // docs write with it.
    const underV1 = `/v1${path}`;
    const meant =
      engineRoutes.has(underV1) || underV1 === "/v1/models" || underV1.startsWith("/v1/models/")
        ? `: did you mean ${req.method} ${clip(underV1)}? An OpenAI client's base URL ends in /v1 (http://host:port/v1).`
        : ".";
    // One of vLLM's own routes Snooze keeps back: say why, and where to go instead. Or a route
    // outside /v1/ with a trailing slash or in other case (`/tokenize/`, `/V1/chat/completions`).
    const advice = engineOwnRoute(path) ?? nearRoute(path);
    sendError(
      res,
      404,
      openAIError(
        `No route for ${req.method} ${path}${advice ? `: ${advice}` : meant}`,
        "invalid_request_error",
        "not_found",
      ),
    );
  };

  const listener = (req: IncomingMessage, res: ServerResponse) =>
    inTurn(req, res, () =>
      handler(req, res).catch((error) => {
        // A defect, not the client's doing: said in the log with its stack, so it can be found.
        log?.error("internal error answering a request", { method: req.method, error });
        // The last resort never throws itself: a throw here (a header Node refuses) would be an
        // unhandled rejection, which ends the process.
        try {
          if (!res.headersSent)
            sendError(
              res,
              500,
              openAIError(`Internal error: ${(error as Error).message}`, "server_error", "internal_error"),
            );
          else res.destroy();
        } catch {
          res.destroy();
        }
      }),
    );
  const server = http.createServer({ keepAliveTimeout: 65_000, requireHostHeader: false }, listener);
  server.once("close", () => {
    unwatch();
    unwatchList();
    unwatchReloads?.();
    timeline.close();
  });
  // Expect: 100-continue: an OpenAI route first checks path, size and budget, the events endpoint
  // takes the body, and nothing else reads one (a 404 must not have the client upload it first).
  deferContinue(server, listener, (status) => activator.countRefused(status));
  // CONNECT (a client that takes Snooze for a forward proxy): Node drops the connection unless
  // told otherwise; say what this is instead.
  server.on("connect", (req: IncomingMessage, socket: Duplex) => {
    endSocketWithError(
      socket,
      "405 Method Not Allowed",
      openAIError(
        `${req.method} is not served here: Snooze is not a forward proxy. Send OpenAI requests to /v1/.`,
        "invalid_request_error",
        "method_not_allowed",
      ),
      { allow: "GET, HEAD, POST", "x-request-id": requestIdOf(req) },
    );
    activator.countRefused(405);
  });
  answerClientErrors(server, (status) => activator.countRefused(status));
  return server;
}

/** `Connection: upgrade` with an `Upgrade` header: the request asks to switch protocols. */
function asksUpgrade(req: IncomingMessage): boolean {
  return (
    req.headers.upgrade !== undefined &&
    String(req.headers.connection ?? "")
      .toLowerCase()
      .split(",")
      .some((token) => token.trim() === "upgrade")
  );
}
