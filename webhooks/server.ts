import { createServer, type Server } from "node:https";
import { type AddressInfo, Server as NetServer, type Socket } from "node:net";
import { getRequestListener } from "@hono/node-server";
import { Hono } from "hono";
import { bodyLimit } from "hono/body-limit";
import { type Clock, systemClock } from "../lib/clock.ts";
import { ByteBudget } from "../lib/http/byte-budget.ts";
import type { Logger } from "../lib/log.ts";
import type { Registry } from "../lib/prometheus.ts";
import { admissionResponse, parseAdmissionReview } from "./admission.ts";
import { handle, type WebhookDeps, type WebhookName, webhookPaths } from "./handlers.ts";
import type { WebhookMetrics } from "./metrics.ts";
import { type Verdict, verdictLabel } from "./verdict.ts";

export interface TlsPair {
  certPem: string;
  keyPem: string;
}

export interface WebhookServerOptions {
  host: string;
  port: number;
  /**
   * Several processes may listen on one port (SO_REUSEPORT), like replicas behind a Service. Then
   * connections that reach this process before it is ready are reset (nothing routes by readiness).
   */
  reusePort?: boolean;
  tls: TlsPair;
  deps: WebhookDeps;
  registry: Registry;
  metrics: WebhookMetrics;
  log: Logger;
  /** Reviews larger than this are refused with 400. */
  maxBodyBytes: number;
  /** Reviews holding more JSON values than this are refused with 400 (default: defaultMaxJsonValues). */
  maxJsonValues?: number;
  /**
   * How long a request may take to arrive whole, headers and body (default 10 s, the longest the
   * webhook configurations give the apiserver); a late one is answered 408 and its connection closed.
   */
  requestTimeoutMs?: number;
  /** A decision that takes longer is answered with a denial (fail closed) before the apiserver gives up. */
  decisionTimeoutMs: number;
  /** Whether the process is ready for traffic: caches synced, certificate loaded. */
  ready: () => boolean;
  /** The shutdown grace's timer (tests drive it). */
  clock?: Clock;
}

export interface WebhookServer {
  url: string;
  port: number;
  server: Server;
  /** Serves a new certificate to new connections; open connections keep theirs. */
  setCertificate(tls: TlsPair): void;
  /**
   * The shutdown is coming: `/readyz` answers 503 and each answer tells its client to close the
   * connection, while new connections are still taken and served (cli/webhooks.ts:
   * `--shutdown-delay`), until the Service's endpoints no longer send here.
   */
  leave(): void;
  /**
   * Stops taking connections and closes each open one once it has been told so (see `close` below);
   * what is left when `graceMs` is over is cut. Resolves when every connection is closed.
   */
  close(graceMs?: number): Promise<void>;
}

/**
 * From this size a review's body counts against the shared budget (twice the body limit): read,
 * parsed and decided, a body costs several times its size in memory, and with no bound 40 reviews
 * of 6 MiB at once took a replica to 436 MB, the pod may use 256 MiB (found by an outside tester).
 * The apiserver's reviews are nearly all far smaller, and never wait.
 */
const largeBodyBytes = 256 * 1024;

const malformed = (message: string) =>
  new Response(`${message}\n`, { status: 400, headers: { "content-type": "text/plain" } });

/**
 * The webhooks' HTTPS server: hono on Node's https server. One POST path per webhook taking an
 * AdmissionReview; /healthz, /readyz and /metrics. A review that is not JSON, not an
 * admission.k8s.io/v1 AdmissionReview, or too large gets HTTP 400 and no verdict; a decision that
 * throws or takes too long is a denial, never a crash and never an "allowed" by accident.
 */
export async function startWebhookServer(options: WebhookServerOptions): Promise<WebhookServer> {
  const { deps, metrics, log } = options;
  const clock = options.clock ?? systemClock;
  let draining = false;
  // When a review came in: its deadline counts from then, its wait for the body budget included.
  const app = new Hono<{ Variables: { arrivedAt: number } }>();

  // While draining, every answer tells the apiserver not to reuse its connection, and the server
  // closes it after the answer: the only way to close a keep-alive connection that no client is
  // about to send on.
  app.use(async (c, next) => {
    await next();
    if (draining) c.header("connection", "close");
  });

  app.get("/healthz", (c) => c.text("ok\n"));
  app.get("/readyz", (c) => (!draining && options.ready() ? c.text("ok\n") : c.text("not ready\n", 503)));
  app.get("/metrics", async (c) =>
    c.body(await options.registry.metrics(), 200, { "content-type": options.registry.contentType }),
  );

  const largeBodies = new ByteBudget(2 * options.maxBodyBytes);
  for (const [name, path] of Object.entries(webhookPaths) as [WebhookName, string][]) {
    app.post(
      path,
      // A large body waits here, before a byte of it is read, until the large ones before it are
      // answered; one without Content-Length may be as large as the limit. One declared over the
      // limit is refused below without being read, so it takes nothing.
      async (c, next) => {
        c.set("arrivedAt", performance.now());
        const header = c.req.header("content-length");
        const declared = header === undefined ? options.maxBodyBytes : Number(header);
        if (declared < largeBodyBytes || declared > options.maxBodyBytes) return next();
        let release: () => void;
        try {
          release = await largeBodies.take(
            Number.isFinite(declared) ? declared : options.maxBodyBytes,
            c.req.raw.signal,
          );
        } catch {
          return malformed("the client went away while its review waited");
        }
        try {
          await next();
        } finally {
          release();
        }
      },
      bodyLimit({
        maxSize: options.maxBodyBytes,
        onError: () => {
          metrics.requests.inc({ webhook: name, verdict: "malformed" });
          return malformed(`the review is larger than ${options.maxBodyBytes} bytes`);
        },
      }),
      async (c) => {
        const started = performance.now();
        try {
          const type = c.req.header("content-type") ?? "";
          // The media type itself, parameters (charset) aside: `\b` let application/json-patch+json in.
          if (!/^application\/json\s*(;|$)/i.test(type)) {
            metrics.requests.inc({ webhook: name, verdict: "malformed" });
            return malformed(`expected Content-Type application/json, got "${type}"`);
          }
          const parsed = parseAdmissionReview(await c.req.text(), options.maxJsonValues);
          if (!parsed.ok) {
            metrics.requests.inc({ webhook: name, verdict: "malformed" });
            log.warn("malformed review", { webhook: name, problem: parsed.problem });
            return malformed(parsed.problem);
          }
          const request = parsed.request;
          const verdict = await decideInTime(
            name,
            (signal) => handle(name, request, deps, signal),
            // The apiserver's clock started when it sent the review: time spent waiting for the
            // body budget and reading the body is gone from the decision's.
            Math.max(
              100,
              Math.round(
                timeoutFor(c.req.query("timeout"), options.decisionTimeoutMs) -
                  (performance.now() - c.get("arrivedAt")),
              ),
            ),
            log,
          );
          const label = verdict.code === 500 ? "error" : verdictLabel(verdict);
          metrics.requests.inc({ webhook: name, verdict: label });
          if (!verdict.allowed) {
            log.info("denied", {
              webhook: name,
              uid: request.uid,
              operation: request.operation,
              resource: request.resource.resource,
              namespace: request.namespace,
              name: request.name,
              user: request.userInfo.username,
              message: verdict.message,
            });
          }
          return c.json(admissionResponse(request.uid, verdict));
        } finally {
          metrics.duration.observe({ webhook: name }, (performance.now() - started) / 1000);
        }
      },
    );
  }
  // The path is right, the method is not: a 404 would say the path is wrong.
  for (const path of Object.values(webhookPaths))
    app.all(path, (c) =>
      c.text(`${c.req.method} is not taken here: send the AdmissionReview with POST\n`, 405, {
        allow: "POST",
      }),
    );
  app.notFound((c) => c.text("not found\n", 404));
  app.onError((error, c) => {
    // Reached only by bugs outside a decision (those are denials): answer 400, not 500, and log.
    log.error("request failed", { path: c.req.path, error });
    return malformed("the review could not be read");
  });

  // Requests must arrive quickly: the apiserver sends a review whole at once and gives up on it
  // after its timeoutSeconds (10 s at most here). A body that stops arriving held its connection,
  // and a large one its part of the body budget, for 30 to 60 s: Node's 30 s request timeout,
  // checked every 30 s (found by an outside tester). Now it is checked every second.
  const requestTimeoutMs = options.requestTimeoutMs ?? 10_000;
  const server = createServer(
    {
      cert: options.tls.certPem,
      key: options.tls.keyPem,
      minVersion: "TLSv1.2",
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs,
      connectionsCheckingInterval: Math.min(1_000, requestTimeoutMs),
    },
    getRequestListener(app.fetch),
  );
  // The apiserver keeps connections open between reviews; a short idle timeout would only add
  // handshakes.
  server.keepAliveTimeout = 60_000;
  server.on("tlsClientError", (error) => log.debug("TLS handshake failed", { error: String(error) }));
  // Every TCP connection, TLS handshakes under way included, so the end of the grace can cut them all.
  const sockets = new Set<Socket>();
  server.on("connection", (socket: Socket) => {
    // On a shared port the kernel hands new connections to every listener, ready or not; one that
    // is not ready yet would serve its throwaway certificate, an x509 error the apiserver does not
    // retry. A reset it does retry, on a new connection, which may reach a ready replica.
    if (options.reusePort && !options.ready()) {
      socket.resetAndDestroy();
      return;
    }
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen({ host: options.host, port: options.port, reusePort: options.reusePort === true }, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostInUrl = options.host.includes(":") ? `[${options.host}]` : options.host;
  return {
    url: `https://${hostInUrl}:${port}`,
    port,
    server,
    setCertificate(tls) {
      server.setSecureContext({ cert: tls.certPem, key: tls.keyPem, minVersion: "TLSv1.2" });
    },
    leave() {
      draining = true;
    },
    async close(graceMs = 10_000) {
      draining = true;
      // Stop accepting, and only that. http.Server#close would also close every idle keep-alive
      // connection at once (Node >= 19): the apiserver, which had just taken one of them from its
      // pool for the next review, then gets a reset or "write: broken pipe", and a POST is not
      // retried. Left open, an idle connection carries at most one more review, answered with
      // `connection: close`, and the apiserver stops using it knowing. net.Server's callback comes
      // once the last connection has closed.
      const closed = new Promise<void>((resolve) => NetServer.prototype.close.call(server, () => resolve()));
      let graceOver!: { cancel(): void };
      await Promise.race([
        closed,
        new Promise<void>((resolve) => (graceOver = clock.setTimeout(resolve, graceMs))),
      ]);
      graceOver.cancel();
      // Past the grace: a connection idle all along belongs to a client that stopped using it, and
      // a review still running has had its time. Cut them.
      for (const socket of sockets) socket.destroy();
      await closed;
    },
  };
}

/** The apiserver sends its own deadline as ?timeout=10s; answer before it. */
function timeoutFor(query: string | undefined, fallbackMs: number): number {
  const match = query ? /^(\d+)s$/.exec(query) : null;
  if (!match) return fallbackMs;
  return Math.max(100, Math.min(fallbackMs, Number(match[1]) * 1000 - 500));
}

async function decideInTime(
  name: WebhookName,
  decide: (signal: AbortSignal) => Promise<Verdict>,
  timeoutMs: number,
  log: Logger,
): Promise<Verdict> {
  let timer: NodeJS.Timeout | undefined;
  // Aborted when the denial below is sent: a decision still running then writes nothing.
  const deadline = new AbortController();
  try {
    return await Promise.race([
      decide(deadline.signal),
      new Promise<Verdict>((resolve) => {
        timer = setTimeout(() => {
          deadline.abort(new Error(`the decision's deadline (${timeoutMs}ms) passed`));
          resolve({
            allowed: false,
            code: 500,
            reason: "Timeout",
            message: `snooze webhook ${name} could not decide within ${timeoutMs}ms (reading the cluster took too long); retry`,
          });
        }, timeoutMs);
      }),
    ]);
  } catch (error) {
    log.error("decision failed", { webhook: name, error });
    return {
      allowed: false,
      code: 500,
      reason: "InternalError",
      message: `snooze webhook ${name} could not decide: ${(error as Error).message}; retry`,
    };
  } finally {
    clearTimeout(timer);
  }
}
