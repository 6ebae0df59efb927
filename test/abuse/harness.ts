import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { createServer as createHttpServer, type RequestListener, type Server } from "node:http";
import { type AddressInfo, connect, createServer, type Server as NetServer, type Socket } from "node:net";
import { Registry } from "prom-client";
import { Activator } from "../../activator/activator.ts";
import { createActivatorServer } from "../../activator/server.ts";
import type { ControlPlane, DemandHint } from "../../lib/control-plane.ts";
import { silentLogger } from "../../lib/log.ts";
import type { ReplicaEvent } from "../../lib/replica-event.ts";
import { builtinTierDefaults, type ModelConfig } from "../../lib/settings/index.ts";

/**
 * The activator alone, on a real socket, with a control plane the test drives: it says a replica
 * at `address` is ready, and says so again when the activator reports it unreachable (so the
 * self-heal retry goes to the same engine). Engines are whatever the test listens with.
 */
export class TestPlane implements ControlPlane {
  readonly demands: { model: string; hint?: DemandHint }[] = [];
  private readonly listeners = new Set<(event: ReplicaEvent) => void>();
  private readonly ready = new Map<string, ReplicaEvent>();

  demand(model: string, hint?: DemandHint): void {
    this.demands.push({ model, hint });
    const event = this.ready.get(model);
    if (hint?.unreachable && event) setImmediate(() => this.emit({ ...event, since: Date.now() }));
  }
  stats(): void {}
  watch(listener: (event: ReplicaEvent) => void): () => void {
    this.listeners.add(listener);
    for (const event of this.ready.values()) listener(event);
    return () => this.listeners.delete(listener);
  }
  /** The model's one replica is ready at `address`. */
  readyAt(model: string, address: string): void {
    const event: ReplicaEvent = { model, replica: `${model}-0`, address, tier: "ready", since: Date.now() };
    this.ready.set(model, event);
    this.emit(event);
  }
  emit(event: ReplicaEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}

export interface TestActivator {
  url: string;
  host: string;
  port: number;
  activator: Activator;
  plane: TestPlane;
  registry: Registry;
  /** The activator's HTTP server (to watch what it parses). */
  server: Server;
  close(): Promise<void>;
}

/** One model `m` with the given settings (times in ms, sizes in bytes). */
export async function startActivator(
  settings: Partial<ModelConfig> = {},
  top: {
    maxBodySize?: number;
    maxHeldBytes?: number;
    bodyTimeout?: number;
    allowedOrigins?: string[];
    /** Other names of `m`, which requests may use (the engine is sent `m`). */
    aliases?: string[];
  } = {},
): Promise<TestActivator> {
  const plane = new TestPlane();
  const registry = new Registry();
  const model: ModelConfig = { ...builtinTierDefaults, id: "m", command: [], env: {}, ...settings };
  const activator = new Activator({
    config: {
      models: new Map([["m", model]]),
      names: new Map([["m", "m"], ...(top.aliases ?? []).map((alias) => [alias, "m"] as [string, string])]),
      slots: new Map(),
      hostMemoryBudget: Number.POSITIVE_INFINITY,
      maxBodySize: top.maxBodySize ?? 1 << 20,
      maxHeldBytes: top.maxHeldBytes,
      bodyTimeout: top.bodyTimeout,
    } as ConstructorParameters<typeof Activator>[0]["config"],
    controlPlane: plane,
    registry,
    log: silentLogger,
  });
  const server = createActivatorServer({
    activator,
    registry,
    allowedOrigins: top.allowedOrigins,
    admin: {
      wake: async () => {},
      sleep: async () => {},
      stop: async () => {},
      details: () => ({}),
      slots: async () => [],
    },
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    host: "127.0.0.1",
    port,
    activator,
    plane,
    registry,
    server,
    async close() {
      server.close();
      await activator.shutdown(0);
      server.closeAllConnections();
    },
  };
}

/** A raw TCP "engine": `onConnection` decides what a connection gets. */
export async function rawEngine(onConnection: (socket: Socket) => void): Promise<{
  address: string;
  connections: Set<Socket>;
  close(): void;
}> {
  const connections = new Set<Socket>();
  const server: NetServer = createServer((socket) => {
    connections.add(socket);
    socket.on("close", () => connections.delete(socket));
    socket.on("error", () => {});
    onConnection(socket);
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return {
    address: `127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections,
    close() {
      for (const socket of connections) socket.destroy();
      server.close();
    },
  };
}

/** An HTTP "engine" in this process. */
export async function httpEngine(listener: RequestListener): Promise<{ address: string; server: Server }> {
  const server = createHttpServer(listener);
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  return { address: `127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

/**
 * A port whose accept queue is full: a child process listens with a backlog of 1 and is stopped
 * (SIGSTOP), and the queue is filled, so the kernel drops further SYNs and a connect hangs.
 */
export async function blackholePort(): Promise<{ address: string; close(): void }> {
  const child: ChildProcess = spawn(
    process.execPath,
    [
      "-e",
      "const s=require('net').createServer();s.listen({port:0,host:'127.0.0.1',backlog:1},()=>console.log(s.address().port))",
    ],
    { stdio: ["ignore", "pipe", "ignore"] },
  );
  const [line] = (await once(child.stdout!, "data")) as [Buffer];
  const port = Number(String(line).trim());
  child.kill("SIGSTOP");
  const fillers: Socket[] = [];
  // The queue holds backlog + 1; a few more only sit in SYN retransmission.
  for (let i = 0; i < 4; i++) {
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    fillers.push(socket);
  }
  await new Promise((resolve) => setTimeout(resolve, 100));
  return {
    address: `127.0.0.1:${port}`,
    close() {
      for (const socket of fillers) socket.destroy();
      child.kill("SIGKILL");
    },
  };
}

/** One HTTP/1.1 exchange on a raw socket (fetch would normalise the path): the whole reply text. */
export async function rawRequest(
  port: number,
  head: string,
  body = "",
  options: { timeoutMs?: number; waitForContinue?: boolean } = {},
): Promise<string> {
  const socket = connect(port, "127.0.0.1");
  socket.setEncoding("latin1");
  let reply = "";
  const done = new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => {
      socket.destroy();
      reject(
        new Error(`no complete reply within ${options.timeoutMs ?? 5_000} ms; got: ${JSON.stringify(reply)}`),
      );
    }, options.timeoutMs ?? 5_000);
    socket.on("data", (chunk: string) => {
      reply += chunk;
      if (options.waitForContinue && body && reply.startsWith("HTTP/1.1 100")) {
        const continued = body;
        body = "";
        socket.write(continued);
      }
      if (isComplete(reply)) {
        clearTimeout(timer);
        socket.end();
        resolve(reply);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(reply);
    });
  });
  await once(socket, "connect");
  socket.write(head);
  if (body && !options.waitForContinue) socket.write(body);
  return done;
}

/** A final (non-1xx) response with its whole Content-Length body has arrived. */
function isComplete(reply: string): boolean {
  let rest = reply;
  while (/^HTTP\/1\.1 1\d\d /.test(rest)) {
    const end = rest.indexOf("\r\n\r\n");
    if (end < 0) return false;
    rest = rest.slice(end + 4);
  }
  const end = rest.indexOf("\r\n\r\n");
  if (end < 0) return false;
  if (/\r\ntransfer-encoding: chunked/i.test(rest.slice(0, end))) return rest.endsWith("\r\n0\r\n\r\n");
  const length = /\r\ncontent-length: (\d+)/i.exec(rest.slice(0, end));
  if (!length) return false;
  return rest.length - end - 4 >= Number(length[1]);
}

/** The status of the final response in a raw reply. */
export function finalStatus(reply: string): number {
  const statuses = [...reply.matchAll(/^HTTP\/1\.1 (\d{3}) /gm)].map((m) => Number(m[1]));
  return statuses.find((s) => s >= 200) ?? 0;
}

/** The JSON body of the final response in a raw reply (sized or chunked). */
export function finalBody(reply: string): any {
  const final = reply.slice(reply.lastIndexOf("HTTP/1.1 "));
  const at = final.indexOf("\r\n\r\n");
  let body = final.slice(at + 4);
  if (/\r\ntransfer-encoding: chunked/i.test(final.slice(0, at))) {
    let joined = "";
    for (;;) {
      const line = body.indexOf("\r\n");
      const size = Number.parseInt(body.slice(0, line), 16);
      if (!size) break;
      joined += body.slice(line + 2, line + 2 + size);
      body = body.slice(line + 2 + size + 2);
    }
    body = joined;
  }
  return JSON.parse(body);
}

/** One chunk of a chunked HTTP/1.1 body. */
export const chunk = (text: string) => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

export const chatBody = (extra: Record<string, unknown> = {}) =>
  JSON.stringify({ model: "m", messages: [{ role: "user", content: "hi" }], max_tokens: 3, ...extra });
