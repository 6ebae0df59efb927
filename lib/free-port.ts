import { once } from "node:events";
import { connect, createServer } from "node:net";

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

/** Whether something accepts connections on `host:port` now (a connection is opened and closed). */
export function portInUse(port: number, host = "127.0.0.1", timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host, timeout: timeoutMs });
    const done = (inUse: boolean) => {
      socket.destroy();
      resolve(inUse);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.once("timeout", () => done(false));
  });
}
