import { createServer } from "node:net";

/**
 * A port on 127.0.0.1 that was free a moment ago. The kernel picks it; there is a small window
 * before the caller binds it, the same one controller-runtime's envtest lives with.
 */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", reject);
    server.listen({ host, port: 0 }, () => {
      const address = server.address();
      server.close(() => {
        if (address && typeof address === "object") resolve(address.port);
        else reject(new Error("no port assigned"));
      });
    });
  });
}
