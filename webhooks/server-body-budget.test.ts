import { connect, type TLSSocket } from "node:tls";
import { Agent, fetch } from "undici";
import { afterAll, beforeAll, expect, test } from "vitest";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { resources, review, scaleFromZero } from "../test/support/webhooks/review-fixtures.ts";
import { startTestWebhookServer } from "../test/support/webhooks/test-server.ts";
import type { CertificatePem } from "./certs/x509.ts";
import type { WebhookServer } from "./server.ts";

/**
 * Large reviews are read and decided a few at a time (their bytes share a budget of twice the body
 * limit); small ones, nearly all of them, never wait. Each large body costs a multiple of its size
 * in memory, and the webhook pod may use 256 MiB.
 */
const cluster = new FakeClusterReader();
let ca: CertificatePem;
let server: WebhookServer;
let dispatcher: Agent;
const maxBodyBytes = 1024 * 1024;

beforeAll(async () => {
  ({ server, ca } = await startTestWebhookServer({
    deps: { cluster },
    maxBodyBytes,
    decisionTimeoutMs: 5_000,
  }));
  dispatcher = new Agent({ connect: { ca: ca.certPem } });
});

afterAll(async () => {
  await dispatcher?.close();
  await server?.close(100);
});

/** A review that declares `length` bytes and sends only its first few: a sender that stalls. */
function stalled(length: number): Promise<TLSSocket> {
  return new Promise((resolve, reject) => {
    const socket = connect({ host: "127.0.0.1", port: server.port, ca: ca.certPem }, () => {
      socket.write(
        `POST /validate/slots HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${length}\r\n\r\n{"apiVersion":`,
        () => resolve(socket),
      );
    });
    socket.on("error", reject);
  });
}

const slotReview = (padding: number) =>
  JSON.stringify({
    ...review({ resource: resources.slots, object: { metadata: { name: "s" } } }),
    padding: "x".repeat(padding),
  });

const answered = async (promise: Promise<unknown>, withinMs: number) =>
  Promise.race([
    promise.then(() => true),
    new Promise((resolve) => setTimeout(() => resolve(false), withinMs)),
  ]);

test("a large review waits while large ones hold the budget; small ones are answered meanwhile", async () => {
  const holders = [await stalled(1_000_000), await stalled(1_000_000)];
  try {
    const large = fetch(`${server.url}/validate/slots`, {
      method: "POST",
      dispatcher,
      headers: { "content-type": "application/json" },
      body: slotReview(300_000),
    });
    const small = await fetch(`${server.url}/validate/slots`, {
      method: "POST",
      dispatcher,
      headers: { "content-type": "application/json" },
      body: slotReview(10),
    });
    expect(small.status).toBe(200);
    // Without the budget it was read and answered at once, beside the two (found by an outside tester).
    expect(await answered(large, 300)).toBe(false);
    holders[0]!.destroy();
    const response = await large;
    expect(response.status).toBe(200);
    expect(((await response.json()) as { response: { allowed: boolean } }).response.allowed).toBe(true);
  } finally {
    for (const socket of holders) socket.destroy();
  }
});

test("time spent waiting for the budget is gone from the decision's deadline, which the apiserver counts from its send", async () => {
  const holders = [await stalled(1_000_000), await stalled(1_000_000)];
  cluster.failReads = "hang";
  try {
    // A scale write from 0 up reads the cluster, which hangs: the decision ends at its deadline.
    const body = JSON.stringify({
      ...scaleFromZero("qwen"),
      padding: "x".repeat(300_000),
    });
    const large = fetch(`${server.url}/validate/scale?timeout=2s`, {
      method: "POST",
      dispatcher,
      headers: { "content-type": "application/json" },
      body,
    });
    expect(await answered(large, 300)).toBe(false);
    holders[0]!.destroy();
    const { response } = (await (await large).json()) as {
      response: { status: { reason: string; message: string } };
    };
    expect(response.status.reason).toBe("Timeout");
    // 1.5 s from the review's arrival (half a second before the apiserver's 2 s), 300 ms of it
    // spent waiting: the decision had 1.2 s at most. It had the full 1.5 s after its wait before.
    const within = Number(/within (\d+)ms/.exec(response.status.message)?.[1]);
    expect(within).toBeLessThanOrEqual(1_200);
  } finally {
    cluster.failReads = undefined;
    for (const socket of holders) socket.destroy();
  }
});
