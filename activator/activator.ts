import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from "node:http";
import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import type { Registry } from "prom-client";
import type { ControlPlane } from "../lib/control-plane.ts";
import { BodyTooLarge, readBody } from "../lib/http/body.ts";
import { sendError } from "../lib/http/json.ts";
import type { Logger } from "../lib/log.ts";
import { openAIError } from "../lib/openai-error.ts";
import type { ModelConfig, SnoozeConfig } from "../lib/settings/index.ts";
import { spanContextOf, tracer } from "../lib/tracing.ts";
import { HoldProgress } from "./hold-progress.ts";
import { type ActivatorMetrics, activatorMetrics } from "./metrics.ts";
import { type Backend, type HoldFailure, ModelRoute } from "./model-route.ts";
import { forward } from "./proxy.ts";
import { resolveModel } from "./resolve-model.ts";

export interface ActivatorOptions {
  config: SnoozeConfig;
  controlPlane: ControlPlane;
  registry: Registry;
  log: Logger;
  /** How often load is reported to the control plane besides the changes that matter at once. */
  statsIntervalMs?: number;
}

const holdMessages: Record<HoldFailure["reason"], (model: string, seconds: number) => string> = {
  budget: (model, s) =>
    `The model \`${model}\` did not become ready within its hold budget; retry in about ${s}s.`,
  "queue-full": (model, s) =>
    `Too many requests are waiting for the model \`${model}\`; retry in about ${s}s.`,
  "activation-failed": (model) => `The model \`${model}\` could not be activated.`,
  shutdown: (model, s) =>
    `Snooze is shutting down; the request for \`${model}\` was not served. Retry in about ${s}s.`,
  abandoned: (model) => `The client left while the request for \`${model}\` was held.`,
};

const holdCodes: Record<HoldFailure["reason"], string> = {
  budget: "hold_budget_exceeded",
  "queue-full": "queue_full",
  "activation-failed": "activation_failed",
  shutdown: "shutting_down",
  abandoned: "abandoned",
};

/**
 * The data plane: resolves each OpenAI request to its model, proxies it to a
 * ready replica with capacity, or holds it until the control plane has one.
 * It never decides tiers; it reports demand and load and follows replica events.
 */
export class Activator {
  readonly routes = new Map<string, ModelRoute>();
  private readonly config: SnoozeConfig;
  private readonly controlPlane: ControlPlane;
  private readonly metrics: ActivatorMetrics;
  private readonly log: Logger;
  private readonly unwatch: () => void;
  private readonly ticker: NodeJS.Timeout;
  private shuttingDown = false;
  private inFlightTotal = 0;
  private readonly idle = new Set<() => void>();

  constructor(options: ActivatorOptions) {
    this.config = options.config;
    this.controlPlane = options.controlPlane;
    this.log = options.log;
    this.metrics = activatorMetrics(options.registry);
    for (const model of options.config.models.values()) this.addRoute(model);
    this.unwatch = this.controlPlane.watch((event) => this.routes.get(event.model)?.apply(event));
    this.ticker = setInterval(() => {
      for (const id of this.routes.keys()) this.report(id);
    }, options.statsIntervalMs ?? 1_000);
    this.ticker.unref();
  }

  private addRoute(model: ModelConfig): ModelRoute {
    const route = new ModelRoute(model, {
      demand: (id, unreachable) => this.controlPlane.demand(id, unreachable ? { unreachable } : undefined),
      loadChanged: (id) => this.report(id),
    });
    this.routes.set(model.id, route);
    return route;
  }

  /**
   * Adds a model, or changes the settings of one, while running (on Kubernetes, Models come and go).
   * A changed model keeps its route: held and in-flight requests, replicas and the hold queue stay
   * (the queue keeps its depth and budget until the model is idle and re-added).
   */
  upsertModel(model: ModelConfig): void {
    const route = this.routes.get(model.id);
    if (route) Object.assign(route.config, model);
    else this.addRoute(model);
    this.config.models.set(model.id, route?.config ?? model);
    for (const [name, id] of [...this.config.names]) if (id === model.id) this.config.names.delete(name);
    for (const name of [model.id, ...model.aliases]) {
      const owner = this.config.names.get(name);
      if (owner === undefined || owner === model.id) this.config.names.set(name, model.id);
      else this.log.warn("a name already belongs to another model", { name, model: model.id, owner });
    }
  }

  /** Removes a model: its held requests are answered with 503, requests in flight finish. */
  removeModel(id: string): void {
    const route = this.routes.get(id);
    if (!route) return;
    this.routes.delete(id);
    this.config.models.delete(id);
    for (const [name, owner] of [...this.config.names]) if (owner === id) this.config.names.delete(name);
    void route.close();
  }

  /** The model id an id or alias names, if any. */
  modelNamed(name: string): string | undefined {
    return this.config.names.get(name);
  }

  get accepting(): boolean {
    return !this.shuttingDown;
  }

  /** Handles one request under `/v1/` that names a model. */
  async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const span = tracer.startSpan(`${req.method} ${req.url?.split("?")[0]}`, {
      kind: SpanKind.SERVER,
      attributes: { "http.request.method": req.method ?? "", "url.path": req.url ?? "" },
    });
    const ctx = trace.setSpan(context.active(), span);
    let model = "";
    let status = 0;
    try {
      status = await context.with(ctx, () => this.serve(req, res, (id) => (model = id)));
    } catch (error) {
      this.log.error("request failed", { error, model });
      status = 500;
      if (!res.headersSent)
        sendError(
          res,
          500,
          openAIError("Internal error in the activator.", "server_error", "internal_error"),
        );
      else res.destroy();
    } finally {
      span.setAttribute("http.response.status_code", status);
      if (model) span.setAttribute("gen_ai.request.model", model);
      if (status >= 500) span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
      this.metrics.requests.inc({ model: model || "unknown", code: String(status) });
    }
  }

  private async serve(
    req: IncomingMessage,
    res: ServerResponse,
    named: (model: string) => void,
  ): Promise<number> {
    if (this.shuttingDown) {
      sendError(
        res,
        503,
        openAIError("Snooze is shutting down.", "service_unavailable_error", "shutting_down"),
        {
          "retry-after": "5",
          connection: "close",
        },
      );
      return 503;
    }
    let body: Buffer;
    try {
      body = await readBody(req, this.config.maxBodySize);
    } catch (error) {
      if (error instanceof BodyTooLarge) {
        sendError(res, 413, openAIError(error.message, "invalid_request_error", "request_too_large"), {
          connection: "close",
        });
        return 413;
      }
      throw error;
    }
    const resolution = resolveModel(req.headers, body, this.config.names);
    if (!resolution.ok) {
      sendError(res, resolution.status, resolution.error);
      return resolution.status;
    }
    named(resolution.model);
    const route = this.routes.get(resolution.model)!;
    let backend = route.tryAcquire() ?? (await this.hold(route, res, resolution.stream));
    if (!backend) return res.headersSent ? 503 : 499;
    for (let attempt = 0; ; attempt++) {
      this.inFlightTotal++;
      const dispatched = performance.now();
      const headers: OutgoingHttpHeaders = {};
      propagation.inject(context.active(), headers);
      const outcome = await forward(req, res, backend, resolution.body, headers, () =>
        this.metrics.upstreamTtfb.observe(
          { model: route.config.id },
          (performance.now() - dispatched) / 1000,
        ),
      );
      route.release(backend);
      this.inFlightTotal--;
      if (this.inFlightTotal === 0) for (const resolve of this.idle) resolve();
      if (outcome.kind === "answered") return outcome.status;
      if (outcome.kind === "aborted") return 499;
      if (outcome.kind === "broken") {
        this.log.warn("engine broke off a response", {
          model: route.config.id,
          replica: backend.replica,
          error: outcome.error,
        });
        return 502;
      }
      // Could not connect: the engine may have died. Self-heal once: have the control plane
      // re-check it and activate again, and send the request to whatever becomes ready.
      this.log.warn("engine unreachable", {
        model: route.config.id,
        replica: backend.replica,
        error: outcome.error,
        attempt,
      });
      if (attempt > 0) {
        sendError(
          res,
          502,
          openAIError(
            `The engine for \`${route.config.id}\` could not be reached: ${outcome.error.message}`,
            "server_error",
            "upstream_unreachable",
          ),
        );
        return 502;
      }
      route.markUnreachable(backend);
      const next = route.tryAcquire() ?? (await this.hold(route, res, resolution.stream));
      if (!next) return res.headersSent ? 503 : 499;
      backend = next;
    }
  }

  /** Holds the request until a replica has room; answers 503 itself when it cannot. */
  private async hold(route: ModelRoute, res: ServerResponse, stream: boolean): Promise<Backend | undefined> {
    const model = route.config.id;
    const started = performance.now();
    const span = tracer.startSpan("snooze.hold", { attributes: { "snooze.model": model } });
    this.metrics.held.inc({ model });
    // Only the first held request asks for an activation; the others join it.
    if (route.held > 0) this.metrics.coalesced.inc({ model });
    const underWay = route.latestEvent?.traceparent ? route.latestActivation : undefined;
    const { promise, cancel } = route.hold();
    const progress =
      stream && route.config.streamProgress
        ? new HoldProgress(res, () => route.progress(started))
        : undefined;
    progress?.start();
    // Holding signalled demand, so an activation this request waits on has begun by now: link to it.
    const onClose = () => cancel();
    res.once("close", onClose);
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
      const seconds = Math.ceil(failure.retryAfterMs / 1000);
      const message =
        failure.reason === "activation-failed"
          ? `${holdMessages[failure.reason](model, seconds)} ${failure.message}`
          : holdMessages[failure.reason](model, seconds);
      span.setStatus({ code: SpanStatusCode.ERROR, message });
      const body = openAIError(message, "service_unavailable_error", holdCodes[failure.reason]);
      if (res.headersSent) progress?.fail(body);
      else if (!res.destroyed) sendError(res, 503, body, { "retry-after": String(seconds) });
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
      this.metrics.held.dec({ model });
      this.metrics.holdDuration.observe({ model, outcome }, (performance.now() - started) / 1000);
      span.setAttribute("snooze.hold.outcome", outcome);
      span.end();
    }
  }

  /** Stops taking requests, answers held ones with 503, waits for in-flight ones up to `graceMs`. */
  async shutdown(graceMs: number): Promise<void> {
    this.shuttingDown = true;
    clearInterval(this.ticker);
    await Promise.all([...this.routes.values()].map((route) => route.close()));
    if (this.inFlightTotal > 0) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, graceMs);
        this.idle.add(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
    this.unwatch();
  }

  private report(model: string): void {
    const route = this.routes.get(model);
    if (!route) return;
    this.metrics.inFlight.set({ model }, route.inFlight);
    this.controlPlane.stats(model, route.inFlight, route.held, route.oldestHeldMs());
  }
}
