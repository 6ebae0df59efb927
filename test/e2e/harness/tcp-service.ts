import { once } from "node:events";
import { connect, createServer, type Socket } from "node:net";

/**
 * What a Kubernetes Service with kube-proxy gives a client, on loopback: one address whose
 * connections go to one of several backends, round-robin, skipping a backend that refuses (a pod
 * that is gone). No kube-proxy runs in the harness, so a test that needs "the Service" (KEDA
 * dialling `snooze-autoscaler:9090` while autoscaler replicas come and go) uses this.
 */
export interface TcpService {
  /** `127.0.0.1:<port>` */
  address: string;
  /** `host:port` of each backend; may be changed while it runs. */
  backends: string[];
  /** Connections per backend so far. */
  readonly counts: Map<string, number>;
  /** Resets every connection through it, as a backend that restarts does; the listener stays. */
  reset(): void;
  close(): Promise<void>;
}

export async function startTcpService(backends: string[]): Promise<TcpService> {
  let next = 0;
  const sockets = new Set<Socket>();
  const counts = new Map<string, number>();
  const reset = () => {
    for (const socket of sockets) socket.resetAndDestroy();
  };
  const service: TcpService = { address: "", backends: [...backends], counts, reset, close };

  const dial = (address: string) =>
    new Promise<Socket>((resolve, reject) => {
      const [host, port] = [
        address.slice(0, address.lastIndexOf(":")),
        Number(address.slice(address.lastIndexOf(":") + 1)),
      ];
      const upstream = connect({ host, port });
      upstream.once("connect", () => resolve(upstream));
      upstream.once("error", reject);
    });

  const server = createServer(async (client) => {
    sockets.add(client);
    client.on("close", () => sockets.delete(client));
    client.on("error", () => {});
    client.pause();
    const list = service.backends;
    for (let i = 0; i < list.length; i++) {
      const address = list[(next + i) % list.length]!;
      try {
        const upstream = await dial(address);
        next = (next + i + 1) % Math.max(1, list.length);
        counts.set(address, (counts.get(address) ?? 0) + 1);
        sockets.add(upstream);
        upstream.on("close", () => {
          sockets.delete(upstream);
          client.destroy();
        });
        upstream.on("error", () => client.destroy());
        client.on("close", () => upstream.destroy());
        client.pipe(upstream);
        upstream.pipe(client);
        client.resume();
        return;
      } catch {
        // Refused: the next backend.
      }
    }
    client.destroy();
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const port = (server.address() as { port: number }).port;
  service.address = `127.0.0.1:${port}`;

  async function close() {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  }
  return service;
}
