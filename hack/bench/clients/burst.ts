/**
 * Load generator for held requests, in its own process (forked with IPC) so
 * its CPU is not the activator's. It first opens `count` keep-alive
 * connections (a GET on `healthPath` each, `connectBatch` at a time: 10,000
 * handshakes at once overflow the listen queue and some get reset), so what
 * follows measures the requests and not a storm of TCP handshakes; then on
 * `fire` sends `count` POSTs at once, one per connection, and records when
 * each was sent and when its response headers came (wall-clock ms, comparable
 * with the activator's).
 *
 * Commands (IPC): connect → {connected}; fire → {sent} once every request
 * was handed to a connection; results → {results} when every response has
 * ended; abort → {} after destroying every connection.
 */
import { Client } from "undici";

export interface BurstConfig {
  origin: string;
  path: string;
  healthPath: string;
  body: string;
  count: number;
  /** Bound on every request, held or not. */
  timeoutMs: number;
}

export interface BurstResult {
  sentAt: number;
  headersAt: number;
  endedAt: number;
  status: number;
  error?: string;
}

export type BurstCommand = { cmd: "connect" } | { cmd: "fire" } | { cmd: "results" } | { cmd: "abort" };

const now = () => performance.timeOrigin + performance.now();
const connectBatch = 500;
const config = JSON.parse(process.argv[2]!) as BurstConfig;
// One client per connection: each POST then goes on its own, already open, connection.
const clients = Array.from(
  { length: config.count },
  () =>
    new Client(config.origin, {
      pipelining: 1,
      headersTimeout: config.timeoutMs,
      bodyTimeout: config.timeoutMs,
      keepAliveTimeout: 600_000,
      keepAliveMaxTimeout: 600_000,
    }),
);
const abort = new AbortController();
let fired: Promise<BurstResult[]> | undefined;

async function connect(): Promise<number> {
  let connected = 0;
  for (let i = 0; i < clients.length; i += connectBatch) {
    await Promise.all(
      clients.slice(i, i + connectBatch).map(async (client) => {
        const { body } = await client.request({ path: config.healthPath, method: "GET" });
        await body.dump();
        connected++;
      }),
    );
  }
  return connected;
}

async function one(client: Client): Promise<BurstResult> {
  const result: BurstResult = { sentAt: now(), headersAt: 0, endedAt: 0, status: 0 };
  try {
    const response = await client.request({
      path: config.path,
      method: "POST",
      headers: { "content-type": "application/json" },
      body: config.body,
      signal: abort.signal,
    });
    result.headersAt = now();
    result.status = response.statusCode;
    await response.body.dump({ limit: Number.POSITIVE_INFINITY });
    result.endedAt = now();
  } catch (error) {
    result.error = (error as Error).message;
  }
  return result;
}

process.on("message", async (message: { id: number; command: BurstCommand }) => {
  const reply = (value: unknown) => process.send!({ id: message.id, reply: value });
  try {
    const { command } = message;
    if (command.cmd === "connect") reply({ connected: await connect() });
    else if (command.cmd === "fire") {
      const all: Promise<BurstResult>[] = [];
      for (const client of clients) all.push(one(client));
      fired = Promise.all(all);
      reply({ sent: config.count });
    } else if (command.cmd === "results") {
      if (!fired) throw new Error("fire first");
      reply({ results: await fired });
    } else if (command.cmd === "abort") {
      abort.abort();
      await Promise.all(clients.map((client) => client.destroy()));
      reply({});
    }
  } catch (error) {
    process.send!({ id: message.id, error: (error as Error).message });
  }
});
process.on("disconnect", () => process.exit(0));
// Never outlive a benchmark that forgot this process.
setTimeout(() => process.exit(3), config.timeoutMs + 60_000).unref();
process.send!({ ready: true });
