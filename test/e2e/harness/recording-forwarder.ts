import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, request } from "node:http";

/** One request as it arrived, and the status it was answered with. */
export interface Recorded {
  path: string;
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
  /** When it arrived (ms since the epoch). */
  at: number;
}

export interface Recorder {
  /** `http://<host>:<port>` */
  url: string;
  readonly seen: Recorded[];
  close(): Promise<void>;
}

/**
 * A server on `host` that records every request and passes it on to `forwardTo` (same path, same
 * headers, the answer back as it came), or, without `forwardTo`, answers 202 with no body (a sink).
 * It shows what a sender sent and what it heard: each delivery of a retried event, its token.
 */
export async function startRecorder(host: string, forwardTo?: string): Promise<Recorder> {
  const seen: Recorded[] = [];
  const server = createServer((req, res) => {
    const at = Date.now();
    const chunks: Buffer[] = [];
    req.on("data", (chunk: Buffer) => chunks.push(chunk));
    req.on("end", () => {
      const body = Buffer.concat(chunks);
      const record = (status: number) =>
        seen.push({ path: req.url ?? "", headers: req.headers, body: body.toString(), status, at });
      if (!forwardTo) {
        record(202);
        res.writeHead(202).end();
        return;
      }
      const target = new URL(forwardTo);
      const upstream = request(
        {
          host: target.hostname,
          port: Number(target.port),
          method: req.method,
          path: req.url,
          headers: req.headers,
        },
        (answer) => {
          record(answer.statusCode ?? 0);
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          answer.pipe(res);
        },
      );
      upstream.on("error", (error) => {
        record(502);
        res.writeHead(502).end(error.message);
      });
      upstream.end(body);
    });
  });
  server.listen(0, host);
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  return {
    url: `http://${host}:${port}`,
    seen,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
