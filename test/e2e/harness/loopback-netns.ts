import { rm } from "node:fs/promises";
import { connect, createServer, type Server, type Socket } from "node:net";
import { join } from "node:path";

/**
 * A network namespace with nothing but its own loopback, for a program whose servers bind fixed
 * ports on every interface (Knative's controller serves its health probes on :8080, the port
 * Knative's autoscaler takes for its stats server): there it binds what it likes, reachable from
 * nowhere else. The one way out is the apiserver: a Unix socket (not bound to a network namespace)
 * joins 127.0.0.1:<apiserver port> inside to the apiserver outside, so the program's kubeconfig is
 * the same as on the host. Needs root (`unshare --net`); the namespace goes when its processes do.
 */
export interface LoopbackNetns {
  /** The argv that runs `argv` in a fresh namespace of its own, joined to the apiserver. */
  wrap(argv: string[]): string[];
  close(): Promise<void>;
}

export async function loopbackNetns(dir: string, name: string, apiserverUrl: string): Promise<LoopbackNetns> {
  if (process.getuid?.() !== 0) throw new Error(`${name} needs its own network namespace, which needs root`);
  const { hostname, port } = new URL(apiserverUrl);
  const socketPath = join(dir, `${name}.apiserver.sock`);
  await rm(socketPath, { force: true });
  const sockets = new Set<Socket>();
  const server: Server = createServer((inside) => {
    const outside = connect({ host: hostname, port: Number(port) });
    for (const s of [inside, outside]) {
      sockets.add(s);
      s.on("close", () => sockets.delete(s));
      s.on("error", () => {
        inside.destroy();
        outside.destroy();
      });
    }
    inside.pipe(outside);
    outside.pipe(inside);
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(socketPath, () => resolve());
  });
  return {
    wrap: (argv) => [
      "unshare",
      "--net",
      "--",
      process.execPath,
      join(import.meta.dirname, "loopback-netns-launch.ts"),
      socketPath,
      `${hostname}:${port}`,
      "--",
      ...argv,
    ],
    async close() {
      for (const s of sockets) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await rm(socketPath, { force: true });
    },
  };
}
