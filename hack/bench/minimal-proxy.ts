/**
 * The least a Node.js reverse proxy can do, as a yardstick for the activator:
 * node:http server, undici pool to one upstream, body streamed both ways, no
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
import { once } from "node:events";
import { createServer } from "node:http";
import { parseArgs } from "node:util";
import { Pool } from "undici";
import { listenActivator } from "../../activator/listen.ts";

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
    // A client that goes away ends the engine's request too (else the engine streams on to nobody).
    const abort = new AbortController();
    res.once("close", () => {
      if (!res.writableFinished) abort.abort();
    });
    try {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers))
        if (typeof value === "string" && !hopByHop.has(name)) headers[name] = value;
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const upstream = await pool.request({
        path: req.url!,
        method: req.method as "POST",
        headers,
        body: Buffer.concat(chunks),
        signal: abort.signal,
      });
      const out: Record<string, string | string[]> = {};
      for (const [name, value] of Object.entries(upstream.headers))
        if (value !== undefined && !hopByHop.has(name)) out[name] = value;
      res.writeHead(upstream.statusCode, out);
      for await (const chunk of upstream.body)
        if (!res.write(chunk)) await once(res, "drain", { signal: abort.signal });
      res.end();
    } catch {
      res.destroy();
    }
  });
  const acceptors = Number(values.acceptors ?? 1);
  if (acceptors <= 1) server.listen(Number(values.port), "127.0.0.1");
  // Several listening sockets on one port, as the activator accepts (only accepting: the request
  // path stays Snooze-free).
  else void listenActivator(server, { port: Number(values.port), host: "127.0.0.1", acceptors });
  process.on("SIGTERM", () => process.exit(0));
}
