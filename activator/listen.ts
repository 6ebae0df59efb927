import { once } from "node:events";
import type { Server as HttpServer } from "node:http";
import { type AddressInfo, createServer, type Server, type ServerOpts } from "node:net";
import { openFilesLimit } from "../lib/open-files-limit.ts";
import { foreignListeners } from "./foreign-listeners.ts";

/**
 * The accept queue the activator listens with: a wake releases every held request at once and a
 * burst of clients (1,000 streams opening together) arrives at once; Node's default of 511 drops
 * the rest, each drop a SYN retransmission of a second or more. The kernel caps it at somaxconn.
 */
export const acceptBacklog = 4096;

/**
 * How many listening sockets share the activator's port (SO_REUSEPORT, Linux). libuv accepts one
 * connection each time epoll reports a listening socket (libuv PR 3696, since 1.45), and while
 * thousands of streams keep their sockets ready, a listening socket comes up once per sweep of
 * them all: new connections then waited in the queue for seconds, accepted 20–25 a second (issue
 * 14, `hack/bench/accept-queue.ts`). With several sockets the kernel spreads the connections over
 * their queues and each sweep accepts one from each: with 32, 1,000 streams opened at once were
 * all accepted within 2 s in 4 of 4 first bursts (with 1: 78–271 still waiting after 2 s in 2 of
 * 3); with 128, 90 % of them within 75 ms of the first (475 ms with 32), and the slowest stream's
 * first event came 20–25 % sooner (docs/benchmarks.md). Each costs a file descriptor and a small
 * server object: an idle `snooze serve` read the same RSS with 128 as with 32, within 0.5 MiB.
 * Fewer under a small descriptor limit (`acceptorsWithin`).
 */
export const acceptors = process.platform === "linux" ? acceptorsWithin(openFilesLimit()) : 1;

/**
 * The acceptors a descriptor limit leaves room for: 128, or an eighth of the limit where that is
 * fewer (at least 1), so a small `ulimit -n` still leaves the descriptors to engines, clients and
 * upstream connections rather than refusing to start (128 sockets under a limit of 120).
 */
export function acceptorsWithin(limit: number | undefined): number {
  const most = 128;
  return limit === undefined ? most : Math.max(1, Math.min(most, Math.floor(limit / 8)));
}

export interface Listening {
  address: AddressInfo;
  /** Stops accepting on every socket (the HTTP server's `close()`); open connections stay. */
  close(): void;
}

/** How often a listen that found another process's listener beside it is tried again. */
const contendedTries = 5;

/**
 * Listens `server` on `host:port` with `acceptors` sockets feeding it. A port some other process
 * holds still fails with EADDRINUSE, even one listening with SO_REUSEPORT itself: a fixed port is
 * first bound alone, without it, and let go again. Two processes that both pass that check before
 * either listens (two `snooze serve` started together) would share the port: each looks for the
 * other's listeners once its own are up, lets the port go if it finds them, and tries again after
 * a random pause, when the first to come back has it alone and the other's check fails.
 */
export async function listenActivator(
  server: HttpServer,
  options: { port: number; host: string; acceptors?: number },
): Promise<Listening> {
  const count = options.acceptors ?? acceptors;
  for (let attempt = 1; ; attempt++) {
    const listening = await listenOnce(server, options.port, options.host, count);
    if (count === 1 || foreignListeners(listening.address.port) === 0) return listening;
    // Its handles are closed before the pause ends (a turn of the event loop), so the port is free.
    listening.close();
    if (attempt === contendedTries) {
      throw Object.assign(
        new Error(`listen EADDRINUSE: address already in use ${options.host}:${options.port}`),
        {
          code: "EADDRINUSE",
        },
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 10 + Math.random() * 90));
  }
}

async function listenOnce(server: HttpServer, port: number, host: string, count: number): Promise<Listening> {
  const shared = count > 1;
  if (shared && port !== 0) await refuseIfTaken(port, host);
  await listen(server, port, host, shared);
  const address = server.address() as AddressInfo;
  const extra: Server[] = [];
  try {
    for (let i = 1; i < count; i++) {
      const acceptor = createServer(socketOptionsOf(server), (socket) => server.emit("connection", socket));
      await listen(acceptor, address.port, host, true);
      extra.push(acceptor);
    }
  } catch (error) {
    for (const acceptor of extra) acceptor.close();
    server.close();
    throw error;
  }
  return {
    address,
    close() {
      for (const acceptor of extra) acceptor.close();
      server.close();
    },
  };
}

/**
 * What the HTTP server sets on the sockets it accepts itself (net.Server keeps it as fields):
 * `noDelay` above all, which node:http turns on and a plain net.Server leaves off, so a socket
 * from another acceptor would otherwise stream its chunks under Nagle's algorithm.
 */
function socketOptionsOf(server: HttpServer): ServerOpts {
  const own = server as unknown as Required<
    Pick<ServerOpts, "allowHalfOpen" | "noDelay" | "keepAlive" | "keepAliveInitialDelay" | "highWaterMark">
  >;
  return {
    allowHalfOpen: own.allowHalfOpen,
    noDelay: own.noDelay,
    keepAlive: own.keepAlive,
    // Kept in seconds, given in milliseconds.
    keepAliveInitialDelay: own.keepAliveInitialDelay * 1000,
    highWaterMark: own.highWaterMark,
  };
}

/** Binds `host:port` alone (no SO_REUSEPORT) and lets it go: fails with EADDRINUSE if it is taken. */
async function refuseIfTaken(port: number, host: string): Promise<void> {
  const probe = createServer();
  await listen(probe, port, host, false);
  await new Promise<void>((resolve) => probe.close(() => resolve()));
}

async function listen(server: Server, port: number, host: string, reusePort: boolean): Promise<void> {
  server.listen({ port, host, backlog: acceptBacklog, ...(reusePort ? { reusePort } : {}) });
  await once(server, "listening");
}
