import type { IncomingMessage, ServerResponse } from "node:http";
import { context, SpanStatusCode, trace } from "@opentelemetry/api";
import { clip } from "../lib/clip.ts";
import type { ControlPlane } from "../lib/control-plane.ts";
import { timerValue } from "../lib/duration.ts";
import {
  BodyStalled,
  BodyTooLarge,
  bodyMinBytes,
  type MinimumPace,
  OverBudget,
  readBody,
} from "../lib/http/body.ts";
import { bodyRefusedWith } from "../lib/http/client-error.ts";
import { refuseEncodedBody } from "../lib/http/content-encoding.ts";
import { sendContinue } from "../lib/http/continue.ts";
import { type FormPart, isMultipartForm, readForm, textOf, withFieldValue } from "../lib/http/form.ts";
import { errorCodeOf, isJsonType, sendError } from "../lib/http/json.ts";
import { type JsonBody, readJsonBody } from "../lib/http/json-body.ts";
import { offLoopBytes, readJsonBodyOffLoop } from "../lib/http/json-off-loop.ts";
import { answered } from "../lib/http/linger.ts";
import { laxBool } from "../lib/lax-bool.ts";
import { LinkedSet } from "../lib/linked-set.ts";
import type { Logger } from "../lib/log.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";
import type { Registry } from "../lib/prometheus.ts";
import {
  defaultBodyTimeout,
  defaultMaxHeldBytes,
  type ModelConfig,
  type SnoozeConfig,
} from "../lib/settings/index.ts";
import { slotRetryAfterMs } from "../lib/slot-line.ts";
import { spanContextOf, tracer } from "../lib/tracing.ts";
import { bodyTooLarge } from "./body-too-large.ts";
import { HoldProgress } from "./hold-progress.ts";
import { type HostRouter, type HostRouting, unknownHost } from "./host-routing.ts";
import { type ActivatorMetrics, activatorMetrics } from "./metrics.ts";
import { type Backend, type HoldFailure, ModelRoute } from "./model-route.ts";
import { checkEnginePath, type PathCheck, streamingRoutes } from "./openai-path.ts";
import { forward } from "./proxy.ts";
import { adoptRequestId } from "./request-id.ts";
import { EngineCall, startServerSpan, usageAttributes } from "./request-trace.ts";
import { type FormFields, nameLookup, type Resolution, resolveModel } from "./resolve-model.ts";
import { makerGone, ResponseIds } from "./response-ids.ts";
import { type SlotPeer, type SlotWait, slotWait } from "./slot-wait.ts";
import { removedWhileHeld } from "./unknown-model.ts";
import { EndedEarly, errorAnswer, failedUnder, failedUnderAnswer } from "./upstream-failure.ts";

export interface ActivatorOptions {
  config: SnoozeConfig;
  controlPlane: ControlPlane;
  registry: Registry;
  log: Logger;
  /** How often load is reported to the control plane besides the changes that matter at once. */
  statsIntervalMs?: number;
  /** Routes by Host first (Snooze's Knative ingress class); requests for other hosts go by `model`. */
  hosts?: HostRouter;
}

/**
 * How many times a request whose engine answered nothing (unreachable, or failed under it) is sent
 * again: once, as Knative's activator retries a failed connection. A request that itself makes the
 * engine fail (an input that crashes it) is then answered, rather than crash-looping engine after
 * engine.
 */
const maxResends = 1;

/** How long the answer to a request its engine died under waits to hear the engine's exit. */
const exitWaitMs = 1_000;

/** What a request refused because Snooze shuts down is told to wait before it retries (elsewhere). */
const shutdownRetryAfterS = 5;

/** 503 `shutting_down`, on a connection that closes: this process serves no retry. */
export function sendShuttingDown(res: ServerResponse, message = "Snooze is shutting down."): void {
  sendError(res, 503, openAIError(message, "service_unavailable_error", "shutting_down"), {
    "retry-after": String(shutdownRetryAfterS),
    connection: "close",
  });
}

/** The hold budget spent while the model's slot had another resident, staying or leaving. */
const slotWaitMessage = (model: string, s: number, reason: string) =>
  `The model \`${model}\` did not become ready within its hold budget: it waits for its slot, as ${reason}; retry in about ${s}s.`;

/**
 * Why a hold ends in a 503 (a request pinned to a replica that went is a 404: `Pin`; so is one
 * whose model was removed while it waited).
 */
type HoldRefusal = Exclude<HoldFailure["reason"], "replica-gone" | "removed">;

const holdMessages: Record<HoldRefusal, (model: string, seconds: number) => string> = {
  budget: (model, s) =>
    `The model \`${model}\` did not become ready within its hold budget; retry in about ${s}s.`,
  "queue-full": (model, s) =>
    `Too many requests are waiting for the model \`${model}\`; retry in about ${s}s.`,
  "activation-failed": (model) => `The model \`${model}\` could not be activated.`,
  shutdown: (model, s) =>
    `Snooze is shutting down; the request for \`${model}\` was not served. Retry in about ${s}s.`,
  abandoned: (model) => `The client left while the request for \`${model}\` was held.`,
};

/** The hold budget spent while the model's engine was being stopped (`snooze stop`, its `zeroAfter`...). */
const stoppingMessage = (model: string, s: number) =>
  `The model \`${model}\` did not become ready within its hold budget: its engine is being stopped (it is killed at the end of its stop grace if it has not exited), and the model can start again only once it is gone; retry in about ${s}s.`;

/** The hold budget spent on a model that was ready, every place on it taken (concurrency, maxConnections). */
const busyMessage = (model: string, s: number) =>
  `The model \`${model}\` is ready but was busy for the whole hold budget: every place on it (its concurrency or maxConnections) stayed taken; retry in about ${s}s.`;

const holdCodes: Record<HoldRefusal, string> = {
  budget: "hold_budget_exceeded",
  "queue-full": "queue_full",
  "activation-failed": "activation_failed",
  shutdown: "shutting_down",
  abandoned: "abandoned",
};

/**
 * The status a request that was held and not dispatched counts as: the 503 the hold answered (or
 * sent as an SSE error event, ending the stream), else 499: its client left, even one that hold
 * progress had already answered 200.
 */
const heldOutcome = (res: ServerResponse) =>
  res.writableEnded ? (res.statusCode >= 400 ? res.statusCode : 503) : 499;

/**
 * The one replica a request may go to, the one whose engine keeps the stored response it is about
 * (`ResponseIds`), and the 404 it gets should that replica go while it is held.
 */
interface Pin {
  replica: string;
  gone: OpenAIErrorBody;
}

/** A forward still running when its replica's drain time is over: the engine goes to sleep or stops. */
const drainEnded = (model: string) =>
  new EndedEarly(
    "drained",
    `The replica of model \`${model}\` answering this request is going to sleep or stopping (idle, a swap on its slot, a scale-in, changed engine settings, or \`snooze sleep\`/\`stop\`), and the request ran past its drainTimeout`,
  );
const unresponsiveEnded = (model: string) =>
  new EndedEarly(
    "unresponsive",
    `The engine of model \`${model}\` answering this request stopped answering (it failed a health check) and is being replaced`,
  );

/**
 * The data plane: resolves each OpenAI request to its model, proxies it to a
 * ready replica with capacity, or holds it until the control plane has one.
 * It never decides tiers; it reports demand and load and follows replica events.
 */
export class Activator {
  readonly routes = new Map<string, ModelRoute>();
  /** Names a model asked for while another model had them (see `handOver`), by name. */
  private readonly wanted = new Map<string, Set<string>>();
  /** Which model made each Responses API id it passed on: a stored response's routes name none. */
  private readonly responseIds = new ResponseIds();
  /** The models' order in the settings file (setOrder); none: the order they were added in. */
  private order: readonly string[] = [];
  /** Each id's place in `order`. */
  private rank = new Map<string, number>();
  /** The place of the route listed last: a route added with a later one is in its place already. */
  private lastRank = -1;
  /** Models being removed: no name leads to them, their held and in-flight requests finish. */
  private readonly retiring = new Map<string, { route: ModelRoute; idle: () => void }>();
  /** Who hears that the model list changed (the status page's event stream). */
  private readonly listListeners = new Set<() => void>();
  private readonly config: SnoozeConfig;
  private readonly controlPlane: ControlPlane;
  readonly hosts?: HostRouter;
  private readonly metrics: ActivatorMetrics;
  private readonly log: Logger;
  private readonly unwatch: () => void;
  private readonly ticker: NodeJS.Timeout;
  private shuttingDown = false;
  /** `leave` was called: served still, but no longer ready for new requests. */
  private left = false;
  private readonly shutdownBegun = new AbortController();
  /** Forwards in flight, and requests whose body is still arriving: a shutdown waits for both. */
  private inFlightTotal = 0;
  private readingTotal = 0;
  private readonly idle = new Set<() => void>();
  /** How each forward in flight, or body being read, is ended when the shutdown grace is over. */
  private readonly stopping = new LinkedSet<() => void>();
  /** The shutdown grace is over: a forward that starts now ends at once. */
  private forced = false;
  /** Body bytes of requests being read or held, all models (maxHeldBytes caps it). */
  private heldBytes = 0;
  private maxHeldBytes: number;
  /** How long a body being read may go without `bodyMinBytes` of it (ms; Infinity: never). */
  private bodyTimeout: number;
  /**
   * Bodies being read, each with its own `bodyTimeout` window (the one in force when it began): when
   * each began (performance clock), and what it holds.
   */
  private readonly uploads = new LinkedSet<{ startedAt: number; pace: MinimumPace; bytes(): number }>();

  constructor(options: ActivatorOptions) {
    this.config = options.config;
    this.controlPlane = options.controlPlane;
    this.hosts = options.hosts;
    this.log = options.log;
    this.metrics = activatorMetrics(options.registry, () =>
      [...this.routes.keys(), ...this.retiring.keys()].flatMap((model) => {
        const route = this.route(model);
        return route ? [{ model, inFlight: route.inFlight }] : [];
      }),
    );
    this.maxHeldBytes = options.config.maxHeldBytes ?? defaultMaxHeldBytes;
    this.bodyTimeout = options.config.bodyTimeout ?? defaultBodyTimeout;
    for (const model of options.config.models.values()) this.addRoute(model);
    this.unwatch = this.controlPlane.watch((event) => this.route(event.model)?.apply(event));
    this.ticker = setInterval(() => {
      for (const id of [...this.routes.keys(), ...this.retiring.keys()]) this.report(id);
    }, options.statsIntervalMs ?? 1_000);
    this.ticker.unref();
  }

  /** Every model as a slot's member, for `slotWait` (which keeps those of the slot asked about). */
  private slotPeers(): SlotPeer[] {
    return [...this.routes.values()].map((r) => ({ config: r.config, event: r.latestEvent, held: r.held }));
  }

  /** What a request held for `route`'s model waits for on its slot, if another member holds it. */
  private slotWaitOf(route: ModelRoute): SlotWait | undefined {
    if (route.config.slot === undefined) return undefined;
    return slotWait(route.config, this.slotPeers(), Date.now());
  }

  /**
   * What each model whose slot another member holds waits for there, by id (the admin API's list,
   * whence `snooze wake`'s word on a wake that timed out waiting for it).
   */
  slotWaits(): Map<string, SlotWait> {
    const peers = this.slotPeers();
    const now = Date.now();
    const waits = new Map<string, SlotWait>();
    for (const { config } of peers) {
      const wait = slotWait(config, peers, now);
      if (wait) waits.set(config.id, wait);
    }
    return waits;
  }

  private addRoute(model: ModelConfig): ModelRoute {
    const route = new ModelRoute(model, {
      demand: (id, unreachable) => {
        const route = this.route(id);
        const pinnedTo = route?.pinnedTo();
        const load = route
          ? {
              inFlight: route.inFlight,
              held: route.held,
              oldestHeldMs: route.oldestHeldMs(),
              ...(pinnedTo ? { pinnedTo } : {}),
            }
          : undefined;
        this.controlPlane.demand(id, { ...(unreachable ? { unreachable } : {}), ...(load ? { load } : {}) });
      },
      loadChanged: (id) => this.report(id),
    });
    this.routes.set(model.id, route);
    // Routes mostly come in the file's order (at start, every one): sorted only when one does not,
    // or a file of 10,000 models took 20 s to serve, sorting them all again for each.
    const rank = this.rankOf(model.id);
    if (rank < this.lastRank) this.sortRoutes();
    else this.lastRank = rank;
    return route;
  }

  /**
   * The models' order in the settings file, after a reload: the routes, whence every listing
   * (`/v1/models`, the admin API, the status page), follow it, a model added later included.
   */
  setOrder(ids: readonly string[]): void {
    const before = [...this.routes.keys()].join("\0");
    this.order = ids;
    this.rank = new Map(ids.map((id, index) => [id, index]));
    this.sortRoutes();
    if ([...this.routes.keys()].join("\0") !== before) this.listChanged();
  }

  /**
   * Calls `listener` when the model list changes: a model added, retired or removed, its aliases or
   * slot changed, the order changed. Returns what stops it.
   */
  onModelListChange(listener: () => void): () => void {
    this.listListeners.add(listener);
    return () => this.listListeners.delete(listener);
  }

  private listChanged(): void {
    for (const listener of this.listListeners) {
      try {
        listener();
      } catch (error) {
        this.log.warn("a listener of the model list failed", { error });
      }
    }
  }

  /** The routes in `order` (those not in it last, as they came): a Map lists in insertion order. */
  private sortRoutes(): void {
    const sorted = [...this.routes].sort(([a], [b]) => this.rankOf(a) - this.rankOf(b));
    this.routes.clear();
    for (const [id, route] of sorted) this.routes.set(id, route);
    this.lastRank = sorted.length > 0 ? this.rankOf(sorted[sorted.length - 1]![0]) : -1;
  }

  /** An id's place in `order`; those not in it come last, as they came. */
  private rankOf(id: string): number {
    return this.rank.get(id) ?? this.order.length;
  }

  /**
   * Adds a model, or changes the settings of one, while running (on Kubernetes, Models come and go).
   * A changed model keeps its route: held and in-flight requests, replicas and the hold queue stay
   * (the queue keeps its depth and budget until the model is idle and re-added).
   */
  upsertModel(model: ModelConfig): void {
    const route = this.routes.get(model.id);
    // What the list shows of a model's settings: a change there is a change of the list.
    const shown = (config: ModelConfig) => JSON.stringify([config.aliases, config.slot ?? null]);
    const listed = route === undefined || shown(route.config) !== shown(model);
    // The names it had: its id and aliases (as upserted, or as a reload's `setNames` gave them), not
    // every name of every model looked through (10,000 Models added one by one took minutes).
    const had = route ? [route.config.id, ...route.config.aliases] : [];
    if (route) this.dropNames(route.config);
    if (route) {
      Object.assign(route.config, model);
      route.reconfigure();
    } else this.addRoute(model);
    this.config.models.set(model.id, route?.config ?? model);
    for (const name of [model.id, ...model.aliases]) {
      const owner = this.config.names.get(name);
      if (owner === undefined || owner === model.id) this.config.names.set(name, model.id);
      else {
        this.log.warn("a name already belongs to another model", { name, model: model.id, owner });
        const wanting = this.wanted.get(name) ?? new Set<string>();
        this.wanted.set(name, wanting.add(model.id));
      }
    }
    this.handOver(had);
    if (listed) this.listChanged();
  }

  /** Takes the names a model has (its id and aliases) off it; those another model owns stay. */
  private dropNames(config: ModelConfig): void {
    for (const name of [config.id, ...config.aliases])
      if (this.config.names.get(name) === config.id) this.config.names.delete(name);
  }

  /**
   * Gives each of `names` that nobody owns now to a model that asked for it while another one had
   * it. On Kubernetes two Models may list one alias; the control plane gives each name to one of
   * them, but the one that had it may let go of it after the other asked (its Model deleted, its
   * route gone after a grace): without this, the name resolved to nobody until that Model changed.
   */
  private handOver(names: Iterable<string>): void {
    for (const name of names) {
      const wanting = this.wanted.get(name);
      if (!wanting || this.config.names.has(name)) continue;
      for (const id of wanting) {
        wanting.delete(id);
        const config = this.routes.get(id)?.config;
        if (config && (config.id === name || config.aliases.includes(name))) {
          this.config.names.set(name, id);
          break;
        }
      }
      if (wanting.size === 0) this.wanted.delete(name);
    }
  }

  /** A model's replicas as this activator knows them now (none when it routes no such model). */
  private readonly replicasOf = (model: string) => this.routes.get(model)?.replicas() ?? [];

  /** A model's route, also while it is being retired. */
  private route(id: string): ModelRoute | undefined {
    return this.routes.get(id) ?? this.retiring.get(id)?.route;
  }

  /**
   * Whether a request's route is still the one its model's id names, so its metrics may count: a
   * removed model's series are gone for good (`metrics.forget`), and a request of it that ends
   * later (held, in flight, sent again) must not bring one back, where it would stay for ever
   * (found by an outside tester: a deleted Model's request count, hold time and errors came back,
   * and its held gauge stayed at 1).
   */
  private counts(route: ModelRoute): boolean {
    return this.route(route.config.id) === route;
  }

  /**
   * Takes a model out of service gently (a config reload removed it): from now on no name leads to
   * it (a new request gets the 404 that lists the known models), while the requests it holds and
   * has in flight are served as before. Resolves once it has none left; `removeModel` then ends it.
   */
  retireModel(id: string): Promise<void> {
    const route = this.routes.get(id);
    if (!route) return Promise.resolve();
    this.routes.delete(id);
    this.config.models.delete(id);
    this.dropNames(route.config);
    this.listChanged();
    return new Promise<void>((resolve) => {
      const idle = () => {
        if (route.held > 0 || route.inFlight > 0) return;
        resolve();
      };
      this.retiring.set(id, { route, idle });
      idle();
    });
  }

  /**
   * The names of a config reload (ids and aliases, which the loader checked are unique), for the
   * models routed here: a name may pass from one model to another in one step.
   */
  setNames(names: ReadonlyMap<string, string>): void {
    this.config.names.clear();
    for (const [name, id] of names) if (this.routes.has(id)) this.config.names.set(name, id);
  }

  /** New limits for request bodies (a config reload): they count for requests from now on. */
  setLimits(limits: { maxBodySize: number; maxHeldBytes?: number; bodyTimeout?: number }): void {
    this.config.maxBodySize = limits.maxBodySize;
    this.maxHeldBytes = limits.maxHeldBytes ?? defaultMaxHeldBytes;
    this.bodyTimeout = limits.bodyTimeout ?? defaultBodyTimeout;
  }

  /** Removes a model: its held requests are answered with 503, requests in flight finish. */
  removeModel(id: string): void {
    const route = this.route(id);
    if (!route) return;
    const listed = this.routes.delete(id);
    this.retiring.delete(id);
    this.config.models.delete(id);
    this.responseIds.forget(id);
    this.dropNames(route.config);
    this.handOver([route.config.id, ...route.config.aliases]);
    this.metrics.forget(id);
    void route.close(false, "removed");
    if (listed) this.listChanged();
  }

  /** The control plane's replica events, as this activator follows them (the status page's timeline). */
  watch(listener: Parameters<ControlPlane["watch"]>[0]): () => void {
    return this.controlPlane.watch(listener);
  }

  /** The model id an id or alias names, if any. */
  modelNamed(name: string): string | undefined {
    return nameLookup(this.config.names, name);
  }

  /** Every name a request may use: the ids and the aliases (what an unknown name is compared with). */
  modelNames(): Iterable<string> {
    return this.config.names.keys();
  }

  /**
   * What a body still arriving must bring in each window of `bodyTimeout` (readBody's `pace`, a
   * new one per body): for the other routes that read a body, such as the events endpoint.
   */
  bodyPace(): MinimumPace {
    return { windowMs: timerValue(this.bodyTimeout), minBytes: bodyMinBytes };
  }

  /** Aborts when the shutdown begins: calls that wait on the control plane answer then. */
  get shutdownSignal(): AbortSignal {
    return this.shutdownBegun.signal;
  }

  get accepting(): boolean {
    return !this.shuttingDown;
  }

  /**
   * Whether it should be sent new requests (`/readyz`): not once it is leaving (`leave`), though it
   * still serves what comes.
   */
  get ready(): boolean {
    return !this.left && !this.shuttingDown;
  }

  get leaving(): boolean {
    return this.left;
  }

  /**
   * The shutdown is coming: `/readyz` says 503 and each answer closes its connection, so the
   * Service's endpoints and the proxies and load balancers in front stop sending here, while what
   * they still send is served as before (cli/activator.ts: `--shutdown-delay`).
   */
  leave(): void {
    this.left = true;
  }

  /** Handles one request under `/v1/` (or `/v2/`, or one of vLLM's own inference routes: `forActivator`) that names a model. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const target = req.url ?? "/";
    const check = checkEnginePath(target);
    // The span is named by the route, never by the client's text; it continues the caller's trace.
    const { span, ctx } = startServerSpan(
      req,
      check.ok ? (check.stored?.route ?? check.path) : undefined,
      clip(target.split("?")[0]!),
    );
    let model = "";
    // The name the client asked for (an alias, or on Knative the Service's model name, not the revision).
    let requestModel = "";
    let status = 0;
    try {
      status = await context.with(ctx, () =>
        this.serve(req, res, check, (id, requested) => {
          model = id;
          requestModel = requested ?? id;
        }),
      );
    } catch (error) {
      if (isClientGone(req, error)) status = 499;
      else {
        // In the request's context, as every other line about it: out here, after `context.with`
        // returned, the line had no trace ids, the one line an operator most needs to find the
        // trace of (found by an outside tester).
        context.with(ctx, () => this.log.error("request failed", { error, model }));
        status = 500;
        if (!res.headersSent)
          sendError(
            res,
            500,
            openAIError("Internal error in the activator.", "server_error", "internal_error"),
          );
        else res.destroy();
      }
    } finally {
      // The parser refused the body being read (lib/http/client-error.ts), and answered and counted
      // the request: its 400 (or 408) is what the client was told, not the 499 of a client gone
      // counted besides it (found by an outside tester: one bad chunk counted as 400 and as 499).
      const refused = bodyRefusedWith(res);
      if (refused !== undefined) status = refused;
      if (refused === undefined && !answered(res) && !res.destroyed) {
        // Every path above answers; should one not, the client still gets an answer, not silence.
        context.with(ctx, () => this.log.error("a request was left unanswered", { model, status }));
        if (!res.headersSent) {
          status = 502;
          sendError(
            res,
            502,
            openAIError(
              "The activator did not get an answer for this request.",
              "server_error",
              "internal_error",
            ),
          );
        } else res.destroy();
      }
      // What was sent (a stream whose client left after its 200 is a 200 that ended early, as
      // `error.type` says); 499, nginx's "client closed", only when nothing was.
      const sent = res.headersSent ? res.statusCode : status;
      span.setAttribute("http.response.status_code", sent);
      // A 5xx (sent, or told mid-stream after a 200) names its error, as the HTTP conventions
      // require: the OpenAI error code Snooze answered with (`hold_budget_exceeded` ...), else the
      // status code (an engine's own 5xx passed through). Found by an outside tester: none was set.
      // So does an answer that failed after its 2xx went out (the engine died mid-stream: an SSE
      // error event or a cut), which the conventions count an error too. Looked up only for a span
      // that records: with tracing off this costs the request nothing.
      const fault =
        status >= 500 ||
        sent >= 500 ||
        (status !== 499 &&
          sent < 400 &&
          res.headersSent &&
          span.isRecording() &&
          errorCodeOf(res) !== undefined);
      if (status === 499 && res.headersSent) span.setAttribute("error.type", "client_closed");
      else if (fault)
        span.setAttribute("error.type", errorCodeOf(res) ?? String(sent >= 500 ? sent : status));
      if (model) span.setAttributes({ "gen_ai.request.model": requestModel, "snooze.model": model });
      if (fault) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      // No model Snooze serves (not found, not named, or removed while the request ran, whose
      // series are gone): an empty label, which no id can be.
      if (refused === undefined)
        this.metrics.requests.inc({ model: model && this.route(model) ? model : "", code: String(status) });
    }
  }

  /**
   * A request refused before it could be routed (malformed, headers too large, no or two Host
   * headers, an expectation Snooze cannot meet, CONNECT, a cross-origin request): counted under no
   * model, so the counts match what clients were answered (found by an outside tester).
   */
  countRefused(status: number): void {
    this.countAnswered("", status);
  }

  /**
   * A request under `/v1/` the server answered itself (a CORS preflight, `GET /v1/models`,
   * `/v1/models/{model}`): counted like the rest, `model` empty when it names none Snooze serves.
   */
  countAnswered(model: string, status: number): void {
    this.metrics.requests.inc({ model, code: String(status) });
  }

  private async serve(
    req: IncomingMessage,
    res: ServerResponse,
    check: PathCheck,
    named: (model: string, requested: string | undefined) => void,
  ): Promise<number> {
    // Refusals before the body: a client that waits for 100-continue never uploads it.
    if (!check.ok) {
      sendError(
        res,
        404,
        openAIError(
          check.advice
            ? `No route for ${req.method} ${clip(req.url ?? "")}: ${check.advice}`
            : `No OpenAI route for ${req.method} ${clip(req.url ?? "")} (${check.reason}).`,
          "invalid_request_error",
          "not_found",
        ),
      );
      return 404;
    }
    const method = check.stored?.method ?? "POST";
    if (req.method !== method) {
      sendError(
        res,
        405,
        openAIError(
          `${check.stored?.route ?? check.path} takes ${method}, not ${req.method}.`,
          "invalid_request_error",
          "method_not_allowed",
        ),
        { allow: method },
      );
      return 405;
    }
    if (this.shuttingDown) {
      sendShuttingDown(res);
      return 503;
    }
    if (req.headers["snooze-model"] !== undefined && headerCount(req, "snooze-model") > 1) {
      // Node joins them (`a, nope`), and would look that up as one name (found by an outside tester).
      sendError(
        res,
        400,
        openAIError(
          "The request has more than one `snooze-model` header; send one, naming the model.",
          "invalid_request_error",
          "duplicate_header",
          "snooze-model",
        ),
      );
      return 400;
    }
    const refused = refuseEncodedBody(req, res, "request body");
    if (refused) return refused;
    const declared = Number(req.headers["content-length"] ?? 0);
    // A body larger than the whole of maxHeldBytes can never be held: a 413, whether declared or
    // found so while read, not a 503 whose Retry-After no client could ever meet.
    const limit = Math.min(this.config.maxBodySize, this.maxHeldBytes);
    if (declared > limit) {
      sendError(res, 413, bodyTooLarge(this.config.maxBodySize, this.maxHeldBytes), { connection: "close" });
      return 413;
    }
    if (declared > 0 && this.heldBytes + declared > this.maxHeldBytes) return this.overBudget(res);
    // A Knative route decides by Host, path and headers alone: a refusal needs no body either.
    const byHost: HostRouting = this.hosts?.route(req.headers.host, check.path, req.headers) ?? {
      kind: "none",
    };
    if (byHost.kind === "refused") {
      sendError(res, byHost.status, byHost.error);
      return byHost.status;
    }
    sendContinue(req, res);
    // Body bytes count against maxHeldBytes while they are read and held, until dispatch. A body
    // refused gives back what it had at once: the rest is only read to learn its size.
    let reserved = 0;
    const reserve = (bytes: number) => {
      if (this.heldBytes + bytes > this.maxHeldBytes) {
        unreserve();
        return false;
      }
      this.heldBytes += bytes;
      reserved += bytes;
      this.metrics.heldBytes.set(this.heldBytes);
      return true;
    };
    const unreserve = () => {
      this.heldBytes -= reserved;
      reserved = 0;
      this.metrics.heldBytes.set(this.heldBytes);
    };
    // The body held changed size (rewritten): what it counts follows; false when it grew past the cap.
    const resize = (bytes: number) => {
      if (bytes > reserved) return reserve(bytes - reserved);
      this.heldBytes -= reserved - bytes;
      reserved = bytes;
      this.metrics.heldBytes.set(this.heldBytes);
      return true;
    };
    try {
      // A `let`: once the request is resolved, the client's bytes are let go (below).
      let body: Buffer | number | undefined = await this.readUpload(req, res, limit, reserve, () => reserved);
      if (typeof body === "number") return body;
      // An audio upload names its model in a form field.
      const contentType = req.headers["content-type"];
      let form: FormPart[] | undefined;
      // Only where vLLM takes a form (a transcription, a translation): elsewhere it is no request.
      if (byHost.kind !== "model" && check.path.startsWith("/v1/audio/") && isMultipartForm(contentType)) {
        try {
          form = readForm(body, contentType);
        } catch (error) {
          const reason = (error as Error).message;
          sendError(
            res,
            400,
            openAIError(
              `The multipart/form-data body could not be read: ${clip(reason)}`,
              "invalid_request_error",
              "invalid_form",
            ),
          );
          return 400;
        }
      }
      // A large JSON body is parsed off the event loop (`offLoopBytes`): one shaped to be slow to
      // parse would hold every other client meanwhile.
      let json =
        !form && body.length >= offLoopBytes && isJsonType(contentType)
          ? await readJsonBodyOffLoop(body)
          : undefined;
      // The client may have left during that parse: its "close" came and went before a hold or a
      // relay listened for it, so it was held until capacity or its budget came, or sent to the
      // engine, which generated its whole answer for no one (found by a probe).
      if (json !== undefined && res.destroyed) return 499;
      // A Knative route names the model by its Host; the body goes to the engine as the client sent it.
      // A stored response's retrieve or cancel names no model: the one that made it, unless a header does.
      const learned =
        check.stored &&
        byHost.kind !== "model" &&
        req.headers["snooze-model"] === undefined &&
        this.responseIds.makerFor(check.stored.id, this.replicasOf);
      if (learned && !learned.ok) {
        sendError(res, 404, learned.error);
        return 404;
      }
      const resolution: Resolution =
        byHost.kind === "model"
          ? { ok: true as const, model: byHost.model, body, ...bodyFields(req, body, json) }
          : learned
            ? { ok: true as const, model: learned.maker.model, body, stream: false }
            : resolveModel(
                req.headers,
                body,
                this.config.names,
                (id) => this.routes.get(id)?.config.servedModel,
                form ? formFields(body, form) : undefined,
                // The file's order, as /v1/models lists them (found by an outside tester: a model
                // removed and added back by a reload came last, as the names were added).
                () => this.routes.keys(),
                json,
                check.path === "/v1/responses" ? (id) => this.responseIds.makerOf(id)?.model : undefined,
              );
      if (!resolution.ok) {
        const known = this.hosts?.hosts() ?? [];
        if (resolution.error.error.code === "missing_model" && known.length > 0) {
          sendError(res, 404, unknownHost(req.headers.host, known));
          return 404;
        }
        sendError(res, resolution.status, resolution.error);
        return resolution.status;
      }
      named(resolution.model, resolution.requested);
      // Where the engine answers JSON whatever `stream` says (embeddings, score, rerank), hold
      // progress must not open an SSE stream: the answer would come as raw JSON in it, which an SSE
      // parser drops (found by an outside tester).
      if (!streamingRoutes.has(check.path)) resolution.stream = false;
      const route = this.routes.get(resolution.model);
      if (!route) {
        // The Model went between the host lookup and now.
        sendError(
          res,
          503,
          openAIError(
            `The model \`${resolution.model}\` is not routed right now; retry in a moment.`,
            "service_unavailable_error",
            "model_not_routed",
          ),
          { "retry-after": "1" },
        );
        return 503;
      }
      // Only the replica that made a stored response has it: its routes, and a follow-up, go there.
      let pin: Pin | undefined;
      if (learned)
        pin = {
          replica: learned.maker.replica,
          gone: makerGone(learned.maker, check.stored!.id, "response_id"),
        };
      else if (check.path === "/v1/responses" && resolution.previousResponseId !== undefined) {
        const previous = resolution.previousResponseId;
        const found = this.responseIds.pinFor(previous, resolution.model, this.replicasOf);
        if (found && !found.ok) {
          sendError(res, 404, found.error);
          return 404;
        }
        if (found)
          pin = {
            replica: found.maker.replica,
            gone: makerGone(found.maker, previous, "previous_response_id"),
          };
      }
      const appended: Record<string, string> = byHost.kind === "model" ? byHost.headers : {};
      if (form && "renamed" in resolution && resolution.renamed !== undefined) {
        // An alias in the form: the engine gets the name it serves, in the client's own form.
        resolution.body =
          withFieldValue(resolution.body, form, "model", resolution.renamed) ?? resolution.body;
      }
      // From here on the body is the one the engine is sent. One rewritten (an alias renamed, a body
      // re-encoded as UTF-8) is a copy: the client's bytes are let go, or a held request kept both,
      // twice what maxHeldBytes counted (found by a probe: 200 Mi of held bodies took 400 Mi). A
      // suspended async function keeps every local it has, used again or not: hence the `let`s.
      body = undefined;
      json = json && { parsed: json.parsed, sent: resolution.body };
      if (!resize(resolution.body.length)) return this.overBudget(res);
      route.arrived();
      let backend =
        route.tryAcquire(pin?.replica) ?? (await this.hold(route, req, res, resolution, json, false, pin));
      if (!backend) return heldOutcome(res);
      unreserve();
      for (let attempt = 0; ; attempt++) {
        const outcome = await this.dispatch(req, res, route, backend, check.path, resolution.body, appended, {
          // What the engine was sent (found by an outside tester: through Knative the CLIENT span
          // said the revision, `chat roll-00001`, while the engine got `model: "roll"`).
          requestModel: resolution.sent ?? route.config.servedModel ?? route.config.id,
          ...(byHost.kind === "model" ? { revision: byHost.revision } : {}),
          route: check.stored?.route ?? check.path,
        });
        if (outcome.kind === "answered") return outcome.status;
        if (outcome.kind === "aborted") return 499;
        if (this.counts(route))
          this.metrics.upstreamErrors.inc({ model: route.config.id, reason: outcome.reason });
        if (outcome.kind === "failed") {
          this.log.warn("engine call failed", {
            model: route.config.id,
            replica: backend.replica,
            reason: outcome.reason,
            error: outcome.error,
          });
          return outcome.status;
        }
        // The engine answered nothing, and nothing of an answer reached the client: it could not
        // be reached, or it failed under the request (died, dropped the connection, stopped
        // answering). The request is not lost: it waits again, as a new one would (hold budget,
        // progress), and goes to whatever replica is ready next, the engine's replacement or
        // another one. Once only: a request that itself kills engines must not crash-loop them.
        const resend = attempt < maxResends && !this.shuttingDown;
        this.log.warn(
          resend
            ? "engine failed before answering; sending the request again"
            : "engine failed before answering",
          {
            model: route.config.id,
            replica: backend.replica,
            reason: outcome.reason,
            error: outcome.error,
            attempt,
          },
        );
        if (!resend) return this.answerUnanswered(res, route, backend, outcome);
        // Have the control plane re-check it (an engine that is gone is replaced; one found well
        // is routed to again): not one it found unresponsive, which it replaces already.
        if (outcome.reason !== "unresponsive") route.markUnreachable(backend);
        const failedOn = backend.replica;
        const next =
          route.tryAcquire(pin?.replica) ?? (await this.hold(route, req, res, resolution, json, true, pin));
        if (!next) return heldOutcome(res);
        // Counted when it is sent again, not when it waits for that: one refused or abandoned while
        // held again was never resent (found by an outside tester).
        if (this.counts(route)) this.metrics.resent.inc({ model: route.config.id, reason: outcome.reason });
        trace.getActiveSpan()?.addEvent("snooze.resend", {
          "snooze.replica": failedOn,
          "error.type": outcome.reason,
          "snooze.resend.attempt": attempt + 1,
        });
        backend = next;
      }
    } finally {
      unreserve();
    }
  }

  /**
   * Reads the request's body whole (readBody), as an upload under way until it is in: the body, or
   * the status of the answer it got instead (408 stalled, 413 too large, 503 over maxHeldBytes, or
   * what a shutdown told it). A method of its own so that what the read needs (its abort, its pace,
   * its upload entry and shutdown hook) is let go once the body is in: a request then held for its
   * model keeps none of it (0.6 KiB per held request, issue 14's memory target).
   */
  private async readUpload(
    req: IncomingMessage,
    res: ServerResponse,
    limit: number,
    reserve: (bytes: number) => boolean,
    reserved: () => number,
  ): Promise<Buffer | number> {
    // A body still arriving at SIGTERM is waited for (up to the grace), then served or answered
    // like any other request; past the grace its client gets 503, not a cut connection.
    const reading = new AbortController();
    const cutShort = () => {
      const message = "Snooze shut down before the request's body arrived.";
      sendShuttingDown(res, message);
      reading.abort(new Error(message));
    };
    // A body that stops arriving is given up at the end of a window of `bodyTimeout` that
    // brought too little: others are told to come back by then (overBudget).
    const pace = this.bodyPace();
    const upload = { startedAt: performance.now(), pace, bytes: reserved };
    this.readingTotal++;
    const unstop = this.stopping.add(cutShort);
    const unlist = this.uploads.add(upload);
    try {
      return await readBody(req, limit, reserve, reading.signal, pace);
    } catch (error) {
      if (res.headersSent) return res.statusCode;
      if (error instanceof BodyStalled) {
        // Its bytes are given back as serve returns; the connection closes once the answer is out.
        sendError(res, 408, openAIError(error.advice, "invalid_request_error", "request_timeout"), {
          connection: "close",
        });
        return 408;
      }
      if (error instanceof BodyTooLarge) {
        sendError(res, 413, bodyTooLarge(this.config.maxBodySize, this.maxHeldBytes), {
          connection: "close",
        });
        return 413;
      }
      if (error instanceof OverBudget) return this.overBudget(res);
      throw error;
    } finally {
      unlist();
      unstop();
      this.readingTotal--;
      this.settle();
    }
  }

  /**
   * The answer for a request whose last try got no answer from the engine (`unanswered`), when it
   * is not sent again: the engine failed under it after a resend (`upstream_died`, with the engine's
   * exit when the control plane tells it within a second), or could not be reached.
   */
  private async answerUnanswered(
    res: ServerResponse,
    route: ModelRoute,
    backend: Backend,
    outcome: Extract<Awaited<ReturnType<typeof forward>>, { kind: "unanswered" }>,
  ): Promise<number> {
    const model = route.config.id;
    let answer: { status: number; body: OpenAIErrorBody; headers?: Record<string, string> };
    if (!this.shuttingDown && failedUnder(outcome.reason, outcome.error)) {
      const exit =
        outcome.reason === "unresponsive" ? undefined : await route.exitOf(backend.replica, exitWaitMs);
      answer = failedUnderAnswer(model, outcome.reason, outcome.error, exit);
      this.log.warn("the engine failed under a request sent again already: answered, not sent again", {
        model,
        replica: backend.replica,
        ...(exit ? { exit } : {}),
      });
    } else {
      answer = errorAnswer(outcome.reason, outcome.error);
      const message = `${answer.body.error.message} (model \`${model}\`)`;
      answer.body = { error: { ...answer.body.error, message } };
    }
    // The engine is likely being replaced: come back once it may be up (found by an outside
    // tester: with none, OpenAI's clients retried at once, into its back-off).
    const retryAfter: Record<string, string> = this.shuttingDown
      ? {}
      : { "retry-after": String(Math.max(1, Math.ceil(route.retryAfterMs() / 1000))) };
    // The client may have left while the exit was waited for.
    if (res.destroyed) return 499;
    if (res.headersSent) new HoldProgress(res, () => "").fail(answer.body);
    else sendError(res, answer.status, answer.body, { ...answer.headers, ...retryAfter });
    return answer.status;
  }

  /** One forward to `backend`, counted in flight; the generation's clocks start here. */
  private async dispatch(
    req: IncomingMessage,
    res: ServerResponse,
    route: ModelRoute,
    backend: Backend,
    path: string,
    body: Buffer,
    appended: Record<string, string>,
    traced: { requestModel: string; revision?: string; route: string },
  ) {
    this.inFlightTotal++;
    const dispatched = performance.now();
    // A CLIENT span per engine call; its context (not the request's) goes to the engine.
    const call = new EngineCall({
      model: traced.requestModel,
      snoozeModel: route.config.id,
      ...(traced.revision ? { revision: traced.revision } : {}),
      route: traced.route,
      path,
      method: req.method ?? "POST",
      address: backend.address,
      replica: backend.replica,
    });
    let outcome: Awaited<ReturnType<typeof forward>> | undefined;
    try {
      outcome = await forward(req, res, backend, {
        path,
        body,
        extraHeaders: {
          ...appended,
          ...call.headers,
          // Its id is read from the answer's first bytes (below), which compressed say nothing:
          // the engine is asked for them as they are (found by an outside tester: the retrieve of
          // a response an engine had gzipped for a client's Accept-Encoding was a 404).
          ...(path === "/v1/responses" ? { "accept-encoding": "identity" } : {}),
        },
        // A new response's id is learned from its answer, for its retrieve and cancel.
        tap:
          path === "/v1/responses"
            ? this.responseIds.tap(
                { model: route.config.id, replica: backend.replica },
                call.recording ? call : undefined,
              )
            : call.recording
              ? call
              : undefined,
        firstByteTimeoutMs: timerValue(route.config.firstByteTimeout),
        idleTimeoutMs: timerValue(route.config.idleTimeout),
        onResponse: () => {
          if (this.counts(route))
            this.metrics.upstreamTtfb.observe(
              { model: route.config.id },
              (performance.now() - dispatched) / 1000,
            );
        },
        onEnd: (end) => {
          const shutdown = () => end(new EndedEarly("shutdown", "Snooze shut down before the answer ended"));
          if (this.forced) {
            queueMicrotask(shutdown);
            return () => {};
          }
          const unstop = this.stopping.add(shutdown);
          const undrain = route.onDrainEnd(backend, (unresponsive) =>
            end((unresponsive ? unresponsiveEnded : drainEnded)(route.config.id)),
          );
          return () => {
            unstop();
            undrain();
          };
        },
      });
      if (outcome.kind === "answered") route.completed(performance.now() - dispatched);
      return outcome;
    } finally {
      // Usage the answer reported goes on the request's span too.
      trace.getActiveSpan()?.setAttributes(usageAttributes(call.end(outcome)));
      route.release(backend);
      this.inFlightTotal--;
      this.settle();
    }
  }

  /**
   * 503 + Retry-After: the bodies already read or held take the whole maxHeldBytes. Held ones give
   * their bytes back when their model is ready; those still arriving when they end, or, if they
   * stalled, at the end of their current `bodyTimeout` window, or of the next one when the current
   * one brought its share already: by then they were given up (found by an outside tester: told
   * 1 s while stalled uploads held the bytes for 5 minutes). Each upload's own window counts: a
   * reload that shortens bodyTimeout leaves the uploads under way on theirs.
   */
  private overBudget(res: ServerResponse): number {
    let waitMs = 1_000;
    for (const route of this.routes.values())
      if (route.held > 0) waitMs = Math.max(waitMs, route.retryAfterMs());
    const now = performance.now();
    for (const { startedAt, pace, bytes } of this.uploads) {
      const { windowMs, minBytes, windowBytes = 0 } = pace;
      if (windowMs === 0 || bytes() === 0) continue;
      const windowEnds = windowMs - ((now - startedAt) % windowMs);
      waitMs = Math.max(waitMs, windowEnds + (windowBytes >= minBytes ? windowMs : 0));
    }
    sendError(
      res,
      503,
      openAIError(
        `Too many request bodies are held (maxHeldBytes: ${this.maxHeldBytes} bytes); retry in about ${Math.ceil(waitMs / 1000)}s.`,
        "service_unavailable_error",
        "held_bytes_exceeded",
      ),
      { "retry-after": String(Math.ceil(waitMs / 1000)), connection: "close" },
    );
    return 503;
  }

  /** Holds the request until a replica has room; answers 503 itself when it cannot. */
  private async hold(
    route: ModelRoute,
    req: IncomingMessage,
    res: ServerResponse,
    { stream, body }: { stream: boolean; body: Buffer },
    /** The body as read off the event loop, if it was (a large one). */
    json: JsonBody | undefined,
    resend = false,
    /** The one replica it may go to, if any. */
    pin?: Pin,
  ): Promise<Backend | undefined> {
    const model = route.config.id;
    if (this.shuttingDown) {
      sendShuttingDown(res);
      return undefined;
    }
    const started = performance.now();
    const span = tracer.startSpan("snooze.hold", { attributes: { "snooze.model": model } });
    // A request sent again after its model was removed is held by a closed route, which answers it
    // at once: its series are gone, and none comes back for it.
    const counted = this.counts(route);
    if (counted) this.metrics.held.inc({ model });
    const underWay = route.latestEvent?.traceparent ? route.latestActivation : undefined;
    const before = route.held;
    const { promise, cancel } = route.hold(resend, pin?.replica);
    // Only the first held request asks for an activation; the others join it (one refused because
    // the queue is full joins nothing).
    if (counted && before > 0 && route.held > before) this.metrics.coalesced.inc({ model });
    const progress =
      stream && route.config.streamProgress
        ? new HoldProgress(
            res,
            () => route.progress(started),
            () => adoptRequestId(req, body, json),
          )
        : undefined;
    progress?.start();
    // Holding signalled demand, so an activation this request waits on has begun by now: link to it.
    // on/off rather than once: `once` wraps the listener in two more objects per held request.
    const onClose = () => cancel();
    res.on("close", onClose);
    let outcome = "dispatched";
    try {
      const backend = await promise;
      if (res.destroyed) {
        // The client left at the same moment capacity came: give it to the next one.
        outcome = "abandoned";
        route.release(backend);
        return undefined;
      }
      return backend;
    } catch (error) {
      const failure = error as HoldFailure;
      outcome = failure.reason;
      if (failure.reason === "replica-gone") {
        // Not a wait that ran out: what the request asked for is gone, as it would be told at once.
        const gone = pin?.gone ?? openAIError("The replica went.", "invalid_request_error", "not_found");
        if (res.headersSent) progress?.fail(gone);
        else if (!res.destroyed) sendError(res, 404, gone);
        return undefined;
      }
      if (failure.reason === "removed") {
        // Not a shutdown, nor a wait to retry: the model is gone from this server (its Model
        // deleted), as a request that came after would be told (found by an outside tester: it
        // heard "Snooze is shutting down", with `Connection: close`).
        const removed = removedWhileHeld(model, this.routes.keys());
        if (res.headersSent) progress?.fail(removed);
        else if (!res.destroyed) sendError(res, 404, removed);
        return undefined;
      }
      // Shutting down: this process will not serve the retry; say so as its other 503s do.
      const shutdown = failure.reason === "shutdown";
      // Shutting down, the model's own estimate says nothing: the retry goes to another process (or
      // this one restarted), where it is held for whatever is left of the start.
      // Waiting for its slot (the slot's policy keeps another member, or one is leaving): said, and
      // the retry told to come soon enough to keep the model's place (slot-wait.ts).
      const slot = failure.reason === "budget" && !failure.busy ? this.slotWaitOf(route) : undefined;
      const seconds = shutdown
        ? shutdownRetryAfterS
        : Math.ceil((slot ? slotRetryAfterMs : failure.retryAfterMs) / 1000);
      const message =
        failure.reason === "activation-failed"
          ? `${holdMessages[failure.reason](model, seconds)} ${failure.message}`
          : failure.reason === "budget" && failure.busy
            ? busyMessage(model, seconds)
            : slot
              ? slotWaitMessage(model, seconds, slot.reason)
              : failure.reason === "budget" && route.stopLeftMs() !== undefined
                ? stoppingMessage(model, seconds)
                : holdMessages[failure.reason](model, seconds);
      // A client that left is no fault of Snooze's: the server span has no error status for it
      // either (found by an outside tester: the abandoned hold was the trace's one error).
      if (failure.reason !== "abandoned") span.setStatus({ code: SpanStatusCode.ERROR, message });
      // The long wait that ended in a refusal is in the log too, with the request's trace ids, not
      // only in its metric: an engine slow to start showed nothing between `engine starting` and
      // its `startTimeout` while every request got 503 (found by an outside tester). A failed
      // activation is told once, by the control plane, not by each request it failed; a full queue
      // is no wait and refuses at whatever rate requests come (its metric and span say it): a line
      // each would let an overload flood the log.
      if (failure.reason === "budget")
        this.log.warn("hold budget spent", {
          model,
          code: holdCodes[failure.reason],
          heldMs: Math.round(performance.now() - started),
          ...(route.latestEvent ? { tier: route.latestEvent.tier } : {}),
          retryAfter: seconds,
        });
      const body = openAIError(message, "service_unavailable_error", holdCodes[failure.reason]);
      if (res.headersSent) progress?.fail(body);
      else if (!res.destroyed)
        sendError(res, 503, body, {
          "retry-after": String(seconds),
          ...(shutdown ? { connection: "close" } : {}),
        });
      return undefined;
    } finally {
      // Link to what this request waited on: the activation under way when it was held, and any
      // swap or activation announced while it waited.
      const waitedOn = [...(underWay ? [underWay] : []), ...route.activationsSince(started)];
      for (const { traceparent } of waitedOn) {
        const linked = spanContextOf(traceparent);
        if (linked) span.addLink({ context: linked });
      }
      progress?.stop();
      res.off("close", onClose);
      if (res.destroyed && outcome === "dispatched") outcome = "abandoned";
      // A model removed meanwhile has no series left to count down (nor one to bring back below 0).
      if (counted && this.counts(route)) {
        this.metrics.held.dec({ model });
        this.metrics.holdDuration.observe({ model, outcome }, (performance.now() - started) / 1000);
      }
      span.setAttribute("snooze.hold.outcome", outcome);
      span.end();
    }
  }

  /**
   * Stops taking requests, answers held ones with 503, waits for in-flight ones up to `graceMs`,
   * then ends those still running (503 before the engine answered, an SSE error event in a stream,
   * a cut connection otherwise) and closes every engine connection, so a frozen engine cannot keep
   * Snooze from exiting.
   */
  async shutdown(graceMs: number): Promise<void> {
    this.shuttingDown = true;
    this.shutdownBegun.abort();
    clearInterval(this.ticker);
    for (const { route } of this.retiring.values()) this.routes.set(route.config.id, route);
    this.retiring.clear();
    for (const route of this.routes.values()) route.answerHeld();
    await this.untilIdle(graceMs);
    if (this.busy() > 0) {
      this.log.warn("shutdown grace is over: ending the requests still in flight", {
        inFlight: this.inFlightTotal,
        reading: this.readingTotal,
        graceMs,
      });
      this.forced = true;
      for (const abort of this.stopping) abort();
      // Their error answers leave at once; a client that does not read gets cut when the server closes.
      await this.untilIdle(1_000);
    }
    await Promise.all([...this.routes.values()].map((route) => route.close(true)));
    this.unwatch();
  }

  /**
   * A forced stop during the shutdown (a second signal, or both graces overrun): ends what is in
   * flight now, as when the grace is over, so each request is told Snooze shut down
   * (`shutting_down`) before its engine is killed under it (found by an outside tester: the streams
   * ended `upstream_broken`, "the engine stopped…"). Resolves once their answers left, or after 1 s.
   */
  async endInFlight(): Promise<void> {
    this.forced = true;
    for (const abort of this.stopping) abort();
    await this.untilIdle(1_000);
  }

  private busy(): number {
    return this.inFlightTotal + this.readingTotal;
  }

  private settle(): void {
    if (this.busy() === 0) for (const resolve of this.idle) resolve();
  }

  private async untilIdle(ms: number): Promise<void> {
    if (this.busy() === 0) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timerValue(ms) || 1);
      this.idle.add(done);
    });
  }

  private report(model: string): void {
    const route = this.route(model);
    if (!route) return;
    this.retiring.get(model)?.idle();
    this.controlPlane.stats(model, {
      inFlight: route.inFlight,
      held: route.held,
      oldestHeldMs: route.oldestHeldMs(),
      flow: route.flow,
      routed: route.routed(),
      pinnedTo: route.pinnedTo(),
    });
  }
}

/** The fields of a form body that route it. */
function formFields(body: Buffer, form: readonly FormPart[]): FormFields {
  // The last of several fields, as the engine's form parser (Starlette's) reads them.
  const last = (name: string) => form.findLast((p) => p.name === name);
  const model = last("model");
  const stream = last("stream");
  return {
    ...(model && textOf(body, model) !== undefined ? { model: textOf(body, model) } : {}),
    stream: stream !== undefined && textOf(body, stream) === "true",
  };
}

/** How many headers of this name (lower case) the request carries: Node's `headers` joins them. */
function headerCount(req: IncomingMessage, name: string): number {
  let count = 0;
  for (let i = 0; i < req.rawHeaders.length; i += 2)
    if (req.rawHeaders[i]!.length === name.length && req.rawHeaders[i]!.toLowerCase() === name) count++;
  return count;
}

/** Whether a JSON body asks for a streamed (SSE) answer. */
/** What a body routed by its Host (Knative) asks: a stream, and which model (the client's name, sent as is). */
function bodyFields(
  req: IncomingMessage,
  body: Buffer,
  json?: JsonBody,
): { stream: boolean; requested?: string; sent?: string } {
  if (body.length === 0 || !isJsonType(req.headers["content-type"])) return { stream: false };
  const parsed = (json ?? readJsonBody(body)).parsed as
    | { stream?: unknown; model?: unknown }
    | null
    | undefined;
  const model = typeof parsed?.model === "string" && parsed.model ? parsed.model : undefined;
  return { stream: laxBool(parsed?.stream) === true, ...(model ? { requested: model, sent: model } : {}) };
}

/** The client closed or reset its connection while its body was read. */
function isClientGone(req: IncomingMessage, error: unknown): boolean {
  const code = (error as { code?: string } | undefined)?.code;
  // The connection, not the request: a request is destroyed once its body has been read to the end,
  // so every fault after that was taken for a client that left (answered 502, its error not logged).
  return req.socket?.destroyed === true || code === "ECONNRESET" || code === "ECONNABORTED";
}
