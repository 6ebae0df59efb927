import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type CloudEvent, HTTP } from "cloudevents";

export interface Arrival {
  headers: IncomingHttpHeaders;
  event: CloudEvent<Record<string, unknown>>;
}

/**
 * An event sink on loopback that reads every delivery with the `cloudevents` SDK (validating it, so
 * an invalid event fails the test that sent it) and answers as `answer` does (202 by default).
 */
export async function cloudEventSink(
  answer: (res: ServerResponse) => void = (res) => res.writeHead(202).end(),
) {
  const arrivals: Arrival[] = [];
  const invalid: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      try {
        const event = HTTP.toEvent({ headers: req.headers, body }) as CloudEvent<Record<string, unknown>>;
        event.validate();
        arrivals.push({ headers: req.headers, event });
      } catch (error) {
        invalid.push(String(error));
      }
      answer(res);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
    arrivals,
    /** Deliveries the SDK refused (none, in a passing test). */
    invalid,
    close() {
      server.closeAllConnections();
      server.close();
    },
  };
}
