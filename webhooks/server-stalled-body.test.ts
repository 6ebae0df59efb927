import { connect } from "node:tls";
import { Registry } from "prom-client";
import { afterAll, beforeAll, expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { FakeLeases, fakeClaims } from "../test/support/webhooks/fake-leases.ts";
import { type CertificatePem, createCA, issueServingCert } from "./certs/x509.ts";
import { webhookMetrics } from "./metrics.ts";
import { startWebhookServer, type WebhookServer } from "./server.ts";

let ca: CertificatePem;
let server: WebhookServer;

beforeAll(async () => {
  const validity = { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000) };
  ca = await createCA("test-ca", validity);
  const registry = new Registry();
  server = await startWebhookServer({
    host: "127.0.0.1",
    port: 0,
    tls: await issueServingCert(ca, ["127.0.0.1"], validity),
    deps: {
      cluster: new FakeClusterReader(),
      autoscaler: {
        username: "system:serviceaccount:snooze-system:snooze-autoscaler",
        leaseNamespace: "snooze-system",
      },
      claims: fakeClaims(new FakeLeases()),
    },
    registry,
    metrics: webhookMetrics(registry),
    log: silentLogger,
    maxBodyBytes: 1024 * 1024,
    decisionTimeoutMs: 5_000,
    requestTimeoutMs: 1_000,
    ready: () => true,
  });
});

afterAll(async () => {
  await server?.close(100);
});

test("a review whose body stops arriving is answered 408 and closed after the request timeout", async () => {
  // It held its connection, and a large one its part of the body budget, for 30 to 60 s (Node's
  // 30 s request timeout, checked every 30 s); the apiserver gives up on a review after 10 s
  // (found by an outside tester).
  const answer = await new Promise<string>((resolve, reject) => {
    let received = "";
    const socket = connect({ host: "127.0.0.1", port: server.port, ca: ca.certPem }, () => {
      socket.write(
        'POST /validate/slots HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"apiVersion":',
      );
    });
    socket.on("data", (chunk) => (received += chunk.toString()));
    socket.on("close", () => resolve(received));
    socket.on("error", reject);
  });
  expect(answer).toMatch(/^HTTP\/1\.1 408 /);
});
