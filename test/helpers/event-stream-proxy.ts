import { once } from "node:events";
import { createServer, request, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export interface EventStreamProxy {
  /** `http://127.0.0.1:<port>`: the page loaded from here reaches Snooze through the proxy. */
  url: string;
  close(): void;
}

/**
 * A proxy in front of Snooze that passes every request on as it is, and each chunk of the event
 * stream (`/snooze/v1/events/stream`), as text, through `write`, which writes it to the page as a test wants
 * it seen: its line ends rewritten, cut in two, or held back while the connection stays open.
 */
export async function eventStreamProxy(
  target: string,
  write: (text: string, res: ServerResponse) => void,
): Promise<EventStreamProxy> {
  const { hostname, port } = new URL(target);
  const server: Server = createServer((req, res) => {
    const upstream = request(
      { host: hostname, port, path: req.url, method: req.method, headers: req.headers },
      (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        if (!req.url?.startsWith("/snooze/v1/events/stream")) return void answer.pipe(res);
        answer.setEncoding("utf8");
        answer.on("data", (text: string) => write(text, res));
        answer.on("end", () => res.end());
      },
    );
    upstream.on("error", () => res.destroy());
    res.on("close", () => upstream.destroy());
    req.pipe(upstream);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    close() {
      server.close();
      server.closeAllConnections();
    },
  };
}
