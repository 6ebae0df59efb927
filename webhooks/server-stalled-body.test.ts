import { connect } from "node:tls";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startTestWebhookServer } from "../test/support/webhooks/test-server.ts";
import type { CertificatePem } from "./certs/x509.ts";
import type { WebhookServer } from "./server.ts";

let ca: CertificatePem;
let server: WebhookServer;

beforeAll(async () => {
  ({ server, ca } = await startTestWebhookServer({
    maxBodyBytes: 1024 * 1024,
    decisionTimeoutMs: 5_000,
    requestTimeoutMs: 1_000,
  }));
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
