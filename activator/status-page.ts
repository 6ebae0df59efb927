import { readFileSync } from "node:fs";
import type { IncomingMessage, ServerResponse } from "node:http";
import { sendError, sendJson } from "../lib/http/json.ts";
import { decodeSegment, malformedSegment } from "../lib/http/path-segment.ts";
import { parseLogsAfter } from "../lib/logs-after.ts";
import { openAIError } from "../lib/openai-error.ts";
import type { Tier } from "../lib/replica-event.ts";
import type { Activator } from "./activator.ts";
import type { AdminActions, AdminModelView, EngineLog, NextChange } from "./admin.ts";
import { resumeAfter, streamEvents } from "./event-stream.ts";
import type { ModelRoute } from "./model-route.ts";
import type { Timeline } from "./timeline.ts";
import { unknownModel } from "./unknown-model.ts";

export interface StatusPageOptions {
  activator: Activator;
  admin: AdminActions;
  timeline: Timeline;
  /** The admin API wants a bearer token: the page asks for it first. */
  tokenRequired?: boolean;
}

const pageFile = new URL("./ui/index.html", import.meta.url);
/** A model's logs; its name may hold slashes, as an admin action's (activator/server.ts). */
export const logsPath = /^\/snooze\/v1\/models\/(.+)\/logs$/;
const order: Tier[] = ["ready", "waking", "starting", "draining", "asleep-1", "asleep-2", "cold"];

const pages = new Map<boolean, { html: Buffer; csp: string }>();

/**
 * The page, read once; its inline script and style are allowed by their hashes, nothing else runs.
 * With an admin token, a `<meta>` says so: the page asks for it before its first call, rather than
 * learning it from three refused ones (401s the browser's console shows).
 */
function statusPage(tokenRequired: boolean): { html: Buffer; csp: string } {
  const cached = pages.get(tokenRequired);
  if (cached) return cached;
  const file = readFileSync(pageFile, "utf8");
  // node:crypto with the first page served, not at start: an idle `snooze serve` needs none of it.
  const { createHash } = process.getBuiltinModule("node:crypto");
  const text = tokenRequired
    ? file.replace("<head>", '<head>\n<meta name="snooze-admin-token" content="required">')
    : file;
  const html = Buffer.from(text);
  const hashes = (tag: string) =>
    [...text.matchAll(new RegExp(`<${tag}>([\\s\\S]*?)</${tag}>`, "g"))]
      .map((m) => `'sha256-${createHash("sha256").update(m[1]!, "utf8").digest("base64")}'`)
      .join(" ");
  const csp = [
    "default-src 'none'",
    `script-src ${hashes("script")}`,
    `style-src ${hashes("style")}`,
    "connect-src 'self'",
    "img-src 'self' data:",
    "base-uri 'none'",
    "form-action 'none'",
    "frame-ancestors 'none'",
  ].join("; ");
  const page = { html, csp };
  pages.set(tokenRequired, page);
  return page;
}

/**
 * The status page (`/`, `/ui`) and the admin routes it reads besides the model list: the timeline
 * of the last hour (`GET /snooze/v1/timeline`), its live stream (`GET /snooze/v1/events/stream`,
 * server-sent events) and an engine's output (`GET /snooze/v1/models/<id>/logs`). Returns a
 * handler that answers a request and resolves true, or resolves false for a path it does not own.
 * The admin routes sit behind the same checks as the rest of `/snooze/` (the caller applies them).
 */
export function statusPageRoutes({ activator, admin, timeline, tokenRequired = false }: StatusPageOptions) {
  return async (req: IncomingMessage, res: ServerResponse, path: string): Promise<boolean> => {
    // The target's query as written: `new URL(target, base)` takes a target beginning `//` for a
    // host, and threw on one it could not read (found by an outside tester: `GET //` was a 500).
    const target = req.url ?? "/";
    const at = target.indexOf("?");
    const query = new URLSearchParams(at < 0 ? "" : target.slice(at + 1));
    if (
      (path === "/" || path === "/ui" || path === "/ui/") &&
      (req.method === "GET" || req.method === "HEAD")
    ) {
      const { html, csp } = statusPage(tokenRequired);
      res.writeHead(200, {
        "content-type": "text/html; charset=utf-8",
        "content-length": html.length,
        "cache-control": "no-cache",
        "content-security-policy": csp,
        // The CSP's frame-ancestors says it to browsers that read it; this, to those that do not.
        "x-frame-options": "DENY",
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
      });
      res.end(req.method === "HEAD" ? undefined : html);
      return true;
    }
    if (path === "/favicon.ico" && (req.method === "GET" || req.method === "HEAD")) {
      res.writeHead(204, { "cache-control": "max-age=86400" });
      res.end();
      return true;
    }
    if (path === "/snooze/v1/timeline" && (req.method === "GET" || req.method === "HEAD")) {
      const models = [...activator.routes.keys()];
      sendJson(res, 200, {
        startedAt: new Date(timeline.startedAt).toISOString(),
        now: new Date().toISOString(),
        entries: timeline.entries(),
        segments: Object.fromEntries(models.map((id) => [id, timeline.segments(id)])),
        usage: Object.fromEntries(models.map((id) => [id, timeline.usage(id)])),
      });
      return true;
    }
    if (path === "/snooze/v1/events/stream" && req.method === "GET") {
      // `after`: the last entry the client has (it gets the ones after it first); `latest`: none.
      // Empty is absent, as for the logs route (a client whose variable for it was unset).
      const afters = query.getAll("after");
      const after = afters[0] || "0";
      if (afters.length > 1 || (after !== "latest" && !/^\d+$/.test(after))) {
        sendError(
          res,
          400,
          openAIError(
            `after must be given once, as the number of the last entry read or \`latest\`, not ${JSON.stringify(afters.join("&").slice(0, 40))}.`,
            "invalid_request_error",
            "invalid_parameter",
            "after",
          ),
        );
        return true;
      }
      // A browser's EventSource that reconnects says what it has; newer than the URL it reuses.
      const resumed = resumeAfter(req.headers["last-event-id"], timeline.startedAt);
      const from = resumed ?? (after === "latest" ? Number.POSITIVE_INFINITY : Number(after));
      streamEvents(req, res, timeline, from);
      return true;
    }
    const logs = logsPath.exec(path);
    if (logs && (req.method === "GET" || req.method === "HEAD")) {
      const name = decodeSegment(logs[1]!);
      if (name === undefined) {
        sendError(res, 400, malformedSegment(logs[1]!));
        return true;
      }
      const id = activator.modelNamed(name);
      if (!id) {
        sendError(res, 404, unknownModel(name, activator.routes.keys(), activator.modelNames()));
        return true;
      }
      if (!admin.logs) {
        sendError(
          res,
          501,
          openAIError(
            "This activator keeps no engine output: on Kubernetes, read it with `kubectl logs` on the model's pods.",
            "invalid_request_error",
            "logs_not_available",
          ),
        );
        return true;
      }
      // Given twice, which one was meant? Neither is taken (`after=3&after=abc` is refused too).
      const afters = query.getAll("after");
      const after = afters.length > 1 ? undefined : parseLogsAfter(query.get("after"));
      if (!after) {
        sendError(
          res,
          400,
          openAIError(
            `after must be given once, as how many lines were read: \`<n>\` or \`<replica>:<n>,...\` with whole numbers and each replica percent-encoded, not ${JSON.stringify(afters.join("&").slice(0, 40))}.`,
            "invalid_request_error",
            "invalid_parameter",
            "after",
          ),
        );
        return true;
      }
      const allLines = query.getAll("lines");
      const lines = query.get("lines");
      if (allLines.length > 1 || (lines !== null && !/^[1-9]\d*$/.test(lines))) {
        sendError(
          res,
          400,
          openAIError(
            `lines must be given once, as a whole number of at least 1 (more than 10000 reads 10000), not ${JSON.stringify(allLines.join("&").slice(0, 40))}.`,
            "invalid_request_error",
            "invalid_parameter",
            "lines",
          ),
        );
        return true;
      }
      const limit = Math.min(10_000, Number(lines ?? 200));
      const replicas = (await admin.logs(id)).map((log) => linesAfter(log, after(log.replica), limit));
      sendJson(res, 200, { model: id, replicas });
      return true;
    }
    return false;
  };
}

/** The lines of `log` numbered above `after` (1 is the engine's first line), at most the last `limit`. */
function linesAfter(log: EngineLog, after: number, limit: number): EngineLog {
  let lines = log.lines;
  if (Number.isFinite(after)) {
    const first = log.total - lines.length + 1;
    lines = lines.slice(Math.max(0, after + 1 - first));
  }
  return { ...log, lines: lines.slice(-limit) };
}

/** What the status page and `snooze status` add to a model's view: its accelerator time and its next change. */
export function extendView(
  view: AdminModelView,
  route: ModelRoute,
  timeline: Timeline,
  now = Date.now(),
): AdminModelView {
  return {
    ...view,
    nextChange:
      view.nextChange === null ? undefined : (view.nextChange ?? estimateNextChange(route, timeline, now)),
    usage: timeline.usage(view.id),
  };
}

/**
 * Where the control plane does not say (Kubernetes), the next change as this activator sees it:
 * from the most awake replica's tier and since, this activator's last work for the model, and the
 * model's ladder settings. Another activator's traffic can push it later.
 */
export function estimateNextChange(
  route: ModelRoute,
  timeline: Timeline,
  now: number,
): NextChange | undefined {
  if (route.held > 0 || route.inFlight > 0) return undefined;
  const config = route.config;
  let best: { tier: Tier; since: number; asleepSince: number } | undefined;
  for (const replica of route.replicas()) {
    const known = timeline.replica(config.id, replica.id);
    const tier = known?.tier ?? replica.tier;
    if (!best || order.indexOf(tier) < order.indexOf(best.tier))
      best = {
        tier,
        since: known?.since ?? now,
        asleepSince: known?.asleepSince ?? known?.since ?? now,
      };
  }
  if (!best) return undefined;
  const at = (ms: number, tier: Tier): NextChange | undefined =>
    Number.isFinite(ms) ? { tier, at: new Date(Math.max(ms, now)).toISOString() } : undefined;
  const deeper: Tier = config.slot === undefined ? "asleep-2" : "cold";
  switch (best.tier) {
    case "ready":
      return at(
        Math.max(route.lastActive ?? 0, best.since) + config.sleepAfter,
        config.sleep ? `asleep-${config.sleepLevel}` : "cold",
      );
    case "asleep-1": {
      const deepAt = best.since + config.deepSleepAfter;
      const zeroAt = best.asleepSince + config.zeroAfter;
      return deepAt < zeroAt ? at(deepAt, deeper) : at(zeroAt, "cold");
    }
    case "asleep-2":
      return at(best.asleepSince + config.zeroAfter, "cold");
    default:
      return undefined;
  }
}
