import type { IncomingMessage, Server } from "node:http";
import { context, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import {
  type AdminVerb,
  adminRoute,
  demandPath,
  forwardedHeader,
  isDemandBody,
  isStatsBody,
  prewarmAsk,
  slotsPath,
  statsPath,
} from "../../lib/control-protocol.ts";
import { bearerToken } from "../../lib/http/bearer.ts";
import { BodyStalled, BodyTooLarge, bodyMinBytes, type MinimumPace, readBody } from "../../lib/http/body.ts";
import { sendJson } from "../../lib/http/json.ts";
import { decodeSegment, malformedSegment } from "../../lib/http/path-segment.ts";
import type { CallerCheck } from "../../lib/kube/token-review.ts";
import { http } from "../../lib/node-http.ts";
import { Counter, type Registry } from "../../lib/prometheus.ts";
import { defaultBodyTimeout } from "../../lib/settings/resolve.ts";
import type { KubeAutoscaler } from "./autoscaler.ts";
import { isDemandRoute } from "./model-demand.ts";

const maxBody = 1 << 20;

export interface ControlServerOptions {
  /**
   * Who the caller of demand, stats, admin actions and slot statuses is, from its bearer token
   * (a TokenReview: lib/kube/token-review.ts); anything but ok is the answer.
   */
  authenticate(token: string | undefined): Promise<CallerCheck>;
  /**
   * What a body still arriving must bring in each window (readBody's `pace`); default: 1 KiB in
   * 10 s, the activator's default `bodyTimeout`.
   */
  bodyPace?: Omit<MinimumPace, "windowBytes">;
}

/**
 * The routes only activators and other autoscaler replicas may call: what changes a model (demand,
 * stats, wake/sleep/stop), the slot statuses, and a Model's demand read (`GET
 * /snooze/v1/demand/...`: what another replica asks the Lease holder for KEDA; its `?watch=1`
 * stream is held open, and its numbers drive KEDA's scaling). State, metrics and probes are read by
 * anyone who can reach the port, as metrics are.
 */
const callerOnly = (method: string | undefined, path: string) =>
  (method === "POST" && (path === demandPath || path === statsPath || adminRoute.test(path))) ||
  (method === "GET" && (path === slotsPath || isDemandRoute(path)));

/**
 * The autoscaler's HTTP surface: demand pokes and stats from activators (or forwarded by another
 * autoscaler replica), admin wake/sleep/stop of a model (carried out by its leader; the answer
 * waits until it is done), slot statuses, its state as JSON, Prometheus metrics and probes. Demand
 * and stats answer 202 at once: acting on them never holds the caller. Only authenticated callers
 * (`options.authenticate`: the activators' and autoscalers' ServiceAccounts) may send demand,
 * stats and admin actions, or read slot statuses: 401 without a valid token, 403 for anyone else.
 */
export function createControlServer(
  autoscaler: KubeAutoscaler,
  registry: Registry,
  options: ControlServerOptions,
): Server {
  const pace = options.bodyPace ?? { windowMs: defaultBodyTimeout, minBytes: bodyMinBytes };
  // Paced, as the activator reads a body: without it a caller that declared a body and sent part of
  // it held the request and its connection until Node's request timeout, 5 minutes (found by an
  // outside tester). A new pace per body: readBody counts each window's bytes in it.
  const json = async (req: IncomingMessage): Promise<unknown> =>
    JSON.parse((await readBody(req, maxBody, undefined, undefined, { ...pace })).toString());
  const callers = new Counter({
    name: "snooze_autoscaler_callers_total",
    help: "Requests to the autoscaler's demand, stats, admin and slots routes, by the answer to who sent them: accepted, or refused with 401 (no valid token), 403 (not an allowed ServiceAccount), 503 (cannot check now).",
    labelNames: ["outcome"],
    registers: [registry],
  });
  return http.createServer(async (req, res) => {
    const path = (req.url ?? "/").split("?")[0];
    try {
      if (callerOnly(req.method, path ?? "")) {
        const caller = await options.authenticate(bearerToken(req.headers));
        callers.inc({ outcome: caller.ok ? "accepted" : String(caller.status) });
        if (!caller.ok) {
          req.resume();
          return sendJson(
            res,
            caller.status,
            { error: caller.message },
            caller.status === 401 ? { "www-authenticate": 'Bearer realm="snooze-autoscaler"' } : {},
          );
        }
      }
      const forwarded = req.headers[forwardedHeader] !== undefined;
      if (req.method === "POST" && path === demandPath) {
        const body = await json(req);
        if (!isDemandBody(body))
          return sendJson(res, 400, { error: "expected {activator, model, unreachable?}" });
        // The caller's trace context (the held request's): the activation this demand starts joins it.
        context.with(propagation.extract(ROOT_CONTEXT, req.headers), () =>
          autoscaler.demand(body, forwarded),
        );
        return sendJson(res, 202, { accepted: true });
      }
      if (req.method === "POST" && path === statsPath) {
        const body = await json(req);
        if (!isStatsBody(body))
          return sendJson(res, 400, { error: "expected {activator, models: [{model, inFlight, held}]}" });
        autoscaler.stats(body, forwarded);
        return sendJson(res, 202, { accepted: true });
      }
      if (autoscaler.modelDemand.handle(req, res, path ?? "", forwarded)) return;
      const admin = req.method === "POST" ? adminRoute.exec(path ?? "") : null;
      if (admin) {
        const verb = admin[2] as AdminVerb;
        const prewarm = verb === "prewarm" ? prewarmAsk((req.url ?? "").split("?")[1] ?? "") : undefined;
        if (prewarm && !prewarm.ok) return sendJson(res, 400, { error: prewarm.message });
        const name = decodeSegment(admin[1]!);
        if (name === undefined)
          return sendJson(res, 400, { error: malformedSegment(admin[1]!).error.message });
        // Whoever asked (an incoming event) may carry a trace: a wake's activation joins it.
        const traced = propagation.extract(ROOT_CONTEXT, req.headers);
        const caller = trace.getSpan(traced) ? traced : undefined;
        const outcome = await autoscaler.admin(
          name,
          verb,
          forwarded,
          prewarm?.ok ? prewarm.ask : undefined,
          caller,
        );
        return sendJson(res, outcome.status, outcome);
      }
      if (req.method === "GET" && path === slotsPath)
        return sendJson(res, 200, { slots: await autoscaler.slotStatuses(forwarded) });
      if (req.method === "GET" && path === "/snooze/v1/state") return sendJson(res, 200, autoscaler.state());
      if (path === "/metrics") {
        const text = await registry.metrics();
        res.writeHead(200, { "content-type": registry.contentType });
        res.end(text);
        return;
      }
      if (path === "/healthz") return sendJson(res, 200, { ok: true });
      if (path === "/readyz") return sendJson(res, autoscaler.ready ? 200 : 503, { ready: autoscaler.ready });
      sendJson(res, 404, { error: `no route for ${req.method} ${path}` });
    } catch (error) {
      if (error instanceof BodyStalled)
        return sendJson(res, 408, { error: error.message }, { connection: "close" });
      if (error instanceof BodyTooLarge) return sendJson(res, 413, { error: error.message });
      if (error instanceof SyntaxError) return sendJson(res, 400, { error: `bad JSON: ${error.message}` });
      sendJson(res, 500, { error: (error as Error).message });
    }
  });
}
