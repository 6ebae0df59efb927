import { once } from "node:events";
import { createServer } from "node:net";

/** A loopback port nothing listens on right now (the OS's pick; another process may take it first). */
export async function freePort(host = "127.0.0.1"): Promise<number> {
  const server = createServer();
  server.listen(0, host);
  await once(server, "listening");
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, "close");
  return port;
}
