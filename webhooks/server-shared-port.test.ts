import { connect } from "node:tls";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startTestWebhookServer } from "../test/support/webhooks/test-server.ts";
import type { CertificatePem } from "./certs/x509.ts";
import type { WebhookServer } from "./server.ts";

/**
 * On a shared port (SO_REUSEPORT) the kernel hands connections to every listener, ready or not:
 * a replica still starting resets them (the apiserver retries a reset) rather than serve the
 * certificate it starts with, which nobody trusts (an x509 error the apiserver does not retry).
 */
let ca: CertificatePem;
let server: WebhookServer;
let ready = false;

beforeAll(async () => {
  ({ server, ca } = await startTestWebhookServer({
    caName: "shared-port-ca",
    reusePort: true,
    maxBodyBytes: 64 * 1024,
    decisionTimeoutMs: 1_000,
    ready: () => ready,
  }));
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
