/**
 * Node.js at its cheapest as a proxy, the floor under every Node data plane: each client connection
 * gets a connection of its own to the upstream and the bytes are copied both ways (`pipe`), with no
 * HTTP parsed or written. Beside the minimal proxy (node:http + undici) it tells apart what Node's
 * sockets cost from what its HTTP costs; a Node proxy that must read the model from the request
 * cannot be cheaper than this.
 *
 *   node hack/bench/node-relay.ts --port 8080 --upstream 127.0.0.1:8000
 */
import { connect, createServer } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { port: { type: "string" }, upstream: { type: "string" } } });
const [host, port] = (values.upstream ?? "").split(":");
createServer((client) => {
  const upstream = connect(Number(port), host);
  client.setNoDelay(true);
  upstream.setNoDelay(true);
  client.pipe(upstream);
  upstream.pipe(client);
  client.on("error", () => upstream.destroy());
  upstream.on("error", () => client.destroy());
  client.on("close", () => upstream.destroy());
  upstream.on("close", () => client.destroy());
}).listen(Number(values.port), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
