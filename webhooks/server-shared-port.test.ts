import { connect } from "node:tls";
import { Registry } from "prom-client";
import { afterAll, beforeAll, expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { fakeClaims } from "../test/support/webhooks/fake-leases.ts";
import { type CertificatePem, createCA, issueServingCert } from "./certs/x509.ts";
import { webhookMetrics } from "./metrics.ts";
import { startWebhookServer, type WebhookServer } from "./server.ts";

/**
 * On a shared port (SO_REUSEPORT) the kernel hands connections to every listener, ready or not:
 * a replica still starting resets them (the apiserver retries a reset) rather than serve the
 * certificate it starts with, which nobody trusts (an x509 error the apiserver does not retry).
 */
let ca: CertificatePem;
let server: WebhookServer;
let ready = false;

beforeAll(async () => {
  const validity = { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000) };
  ca = await createCA("shared-port-ca", validity);
  const registry = new Registry();
  server = await startWebhookServer({
    host: "127.0.0.1",
    port: 0,
    reusePort: true,
    tls: await issueServingCert(ca, ["127.0.0.1"], validity),
    deps: {
      cluster: new FakeClusterReader(),
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
    decisionTimeoutMs: 1_000,
    ready: () => ready,
  });
});

afterAll(() => server?.close(0));

const handshake = () =>
  new Promise<string>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port: server.port, ca: ca.certPem }, () => {
      socket.end();
      resolve("handshake");
    });
    socket.once("error", (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
  });

test("before it is ready, a replica on a shared port resets connections; once ready, it serves", async () => {
  expect(await handshake()).toBe("ECONNRESET");
  ready = true;
  expect(await handshake()).toBe("handshake");
});
