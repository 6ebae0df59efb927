/**
 * The least a Node.js reverse proxy can do, as a yardstick for the activator:
 * node:http server, undici pool to one upstream, the request body read whole (as
 * the activator reads it, to find the model) and the answer streamed back, no
 * model resolution, metrics or tracing. What the activator costs beyond this
 * is its own; what this costs beyond nginx is the platform's.
 *
 *   node hack/bench/minimal-proxy.ts --port 8080 --upstream 127.0.0.1:8000 [--workers 2] [--acceptors 8]
 *
 * With --workers N it is N such processes behind one port (node:cluster; the primary accepts and
 * hands connections round robin), to measure what spreading a Node data plane over cores buys.
 * With --acceptors N it accepts on N sockets sharing the port, as the activator does
 * (activator/listen.ts), to measure accepting apart from the rest.
 */
import cluster from "node:cluster";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { type Dispatcher, Pool } from "undici";
import { listenActivator } from "../../activator/listen.ts";
import { readBody } from "../../lib/http/body.ts";

const { values } = parseArgs({
  options: {
    port: { type: "string" },
    upstream: { type: "string" },
    workers: { type: "string" },
    acceptors: { type: "string" },
  },
});
const workers = Number(values.workers ?? 1);
if (workers > 1 && cluster.isPrimary) {
  for (let i = 0; i < workers; i++) cluster.fork();
  process.on("SIGTERM", () => {
    for (const worker of Object.values(cluster.workers ?? {})) worker?.kill();
    process.exit(0);
  });
} else serve();

function serve() {
  const pool = new Pool(`http://${values.upstream}`, { connections: null, pipelining: 1 });
  const hopByHop = new Set(["connection", "keep-alive", "transfer-encoding", "host", "content-length"]);

  const server = createServer(async (req, res) => {
    const headers: Record<string, string> = {};
    for (const [name, value] of Object.entries(req.headers))
      if (typeof value === "string" && !hopByHop.has(name)) headers[name] = value;
    let body: Buffer;
    try {
      body = await readBody(req, Number.POSITIVE_INFINITY);
    } catch {
      return res.destroy();
    }
    // undici's handler interface, as the activator forwards (activator/proxy.ts): each chunk is
    // written as it is parsed, with backpressure, and a client that goes away ends the engine's
    // request too (else the engine streams on to nobody).
    let controller: Dispatcher.DispatchController | undefined;
    res.once("close", () => {
      if (!res.writableFinished) controller?.abort(new Error("client gone"));
    });
    const resume = () => controller?.resume();
    pool.dispatch(
      { path: req.url!, method: req.method as "POST", headers, body },
      {
        onRequestStart: (c) => {
          controller = c;
          if (res.destroyed) c.abort(new Error("client gone"));
        },
        onResponseStart: (_c, status, upstreamHeaders) => {
          const out: Record<string, string | string[]> = {};
          for (const [name, value] of Object.entries(upstreamHeaders))
            if (value !== undefined && !hopByHop.has(name)) out[name] = value;
          // A sized answer keeps its length: no chunked framing, headers and body in one write.
          if (upstreamHeaders["content-length"]) out["content-length"] = upstreamHeaders["content-length"];
          res.writeHead(status, out);
        },
        onResponseData: (c, chunk) => {
          if (!res.write(chunk) && !c.paused) {
            c.pause();
            res.once("drain", resume);
          }
        },
        onResponseEnd: () => res.end(),
        onResponseError: () => res.destroy(),
      },
    );
  });
  const acceptors = Number(values.acceptors ?? 1);
  if (acceptors <= 1) server.listen(Number(values.port), "127.0.0.1");
  // Several listening sockets on one port, as the activator accepts (only accepting: the request
  // path stays Snooze-free).
  else void listenActivator(server, { port: Number(values.port), host: "127.0.0.1", acceptors });
  process.on("SIGTERM", () => process.exit(0));
}
