import { connect } from "node:net";
import { Registry } from "prom-client";
import { Client } from "undici";
import { afterEach, beforeAll, expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { ManualClock } from "../test/support/manual-clock.ts";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { fakeClaims } from "../test/support/webhooks/fake-leases.ts";
import { resources, review, scaleFromZero } from "../test/support/webhooks/review-fixtures.ts";
import { type CertificatePem, createCA, issueServingCert } from "./certs/x509.ts";
import { webhookMetrics } from "./metrics.ts";
import { startWebhookServer, type WebhookServer } from "./server.ts";

/**
 * The webhook server's shutdown with keep-alive clients, as the apiserver keeps them: a connection
 * idle when the drain begins must still carry the client's next review (the client may be sending
 * it at that very moment), answered with `connection: close`; only what is left when the grace
 * ends is cut. The grace runs on a manual clock.
 */
let ca: CertificatePem;
let serving: CertificatePem;
const clients: Client[] = [];
const cluster = new FakeClusterReader();
/** Called whenever a decision reads the cluster: a review is then in the server's hands. */
let onRead = () => {};
const observed = new Proxy(cluster, {
  get(target, key) {
    const value = Reflect.get(target, key);
    if (typeof value !== "function") return value;
    return (...args: unknown[]) => {
      onRead();
      return value.apply(target, args);
    };
  },
});

beforeAll(async () => {
  const validity = { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000) };
  ca = await createCA("drain-ca", validity);
  serving = await issueServingCert(ca, ["127.0.0.1"], validity);
});

afterEach(async () => {
  cluster.failReads = undefined;
  onRead = () => {};
  await Promise.all(clients.splice(0).map((c) => c.destroy()));
});

async function start(clock: ManualClock): Promise<WebhookServer> {
  const registry = new Registry();
  return startWebhookServer({
    host: "127.0.0.1",
    port: 0,
    tls: serving,
    deps: {
      cluster: observed,
      autoscaler: {
        username: "system:serviceaccount:snooze-system:snooze-autoscaler",
        leaseNamespace: "snooze-system",
      },
      claims: fakeClaims(),
    },
    registry,
    metrics: webhookMetrics(registry),
    log: silentLogger,
    maxBodyBytes: 64 * 1024,
    // A hanging decision stays in flight until the grace is over (this timer is a real one).
    decisionTimeoutMs: 60_000,
    ready: () => true,
    clock,
  });
}

/** One keep-alive connection, like one of the apiserver's pooled connections. */
function keepAliveClient(server: WebhookServer): Client {
  const client = new Client(server.url, {
    connect: { ca: ca.certPem },
    keepAliveTimeout: 600_000,
    keepAliveMaxTimeout: 600_000,
    pipelining: 1,
  });
  clients.push(client);
  return client;
}

const model = review({
  resource: resources.models,
  object: {
    metadata: { name: "qwen" },
    spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "q" } },
  },
});
const scale = scaleFromZero("qwen");

const send = (client: Client, path: string, body: unknown) =>
  client.request({
    path,
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(body),
  });

async function answered(client: Client) {
  const response = await send(client, "/validate/models", model);
  const json = (await response.body.json()) as { response: { uid: string } };
  return { status: response.statusCode, connection: response.headers.connection, uid: json.response.uid };
}

const refused = (port: number) =>
  new Promise<string>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port });
    socket.once("connect", () => {
      socket.destroy();
      resolve("accepted");
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? "error"));
  });

test("connections idle when the drain begins carry one more review each, told to close; then close resolves", async () => {
  const clock = new ManualClock();
  const server = await start(clock);
  const pool = [keepAliveClient(server), keepAliveClient(server), keepAliveClient(server)];
  for (const client of pool) expect((await answered(client)).status).toBe(200);
  // Now idle, as the apiserver's pooled connections are between reviews.

  let closed = false;
  const closing = server.close(10_000).then(() => (closed = true));
  await clock.settle();
  expect(await refused(server.port)).toBe("ECONNREFUSED");
  expect(closed).toBe(false);

  // The clients, not knowing, send their next review on the connections they have.
  const answers = await Promise.all(pool.map(answered));
  for (const answer of answers)
    expect(answer).toEqual({ status: 200, connection: "close", uid: "705ab4f5-6393-11e8-b7cc-42010a800002" });
  // Every connection was told and closed: close resolves without the grace running out.
  await closing;
  expect(clock.pending).toBe(0);
});

test("when the grace ends, a connection idle all along and a review still running are cut", async () => {
  const clock = new ManualClock();
  const server = await start(clock);
  const idle = keepAliveClient(server);
  expect((await answered(idle)).status).toBe(200);
  const idleGone = new Promise<void>((resolve) => idle.once("disconnect", () => resolve()));
  cluster.failReads = "hang";
  const reading = new Promise<void>((resolve) => (onRead = resolve));
  const running = send(keepAliveClient(server), "/validate/scale", scale).then(
    () => "answered",
    (error: Error) => error.name,
  );
  await reading;

  let closed = false;
  const closing = server.close(5_000).then(() => (closed = true));
  await clock.settle();
  expect(closed).toBe(false);
  clock.advance(4_999);
  await clock.settle();
  expect(closed).toBe(false);

  clock.advance(1);
  await closing;
  await idleGone;
  expect(await running).not.toBe("answered");
});

test("leaving before the shutdown: /readyz 503, new connections still taken, each answer told to close", async () => {
  // `snooze webhooks --shutdown-delay`: the Service's endpoints lose the pod a moment after
  // SIGTERM, and a review sent to a closed port meanwhile would fail the write it guards.
  const clock = new ManualClock();
  const server = await start(clock);
  const before = keepAliveClient(server);
  expect((await answered(before)).connection).toBe("keep-alive");
  server.leave();
  const readyz = await keepAliveClient(server).request({ path: "/readyz", method: "GET" });
  expect(readyz.statusCode).toBe(503);
  await readyz.body.text();
  expect(await refused(server.port)).toBe("accepted");
  for (const client of [before, keepAliveClient(server)])
    expect(await answered(client)).toEqual({
      status: 200,
      connection: "close",
      uid: "705ab4f5-6393-11e8-b7cc-42010a800002",
    });
  await server.close(1_000);
});
