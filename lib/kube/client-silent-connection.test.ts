import { once } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createSecureServer, type Http2SecureServer } from "node:http2";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterEach, expect, test } from "vitest";
import { createCA, issueCert } from "../../test/e2e/harness/certs.ts";
import { KubeClient } from "./client.ts";

const cleanups: (() => Promise<unknown> | unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** An API server stand-in over TLS, which undici reaches over HTTP/2 as it does kube-apiserver. */
async function apiServer(): Promise<{ port: number; ca: string }> {
  const dir = await mkdtemp(join(tmpdir(), "snooze-h2-"));
  cleanups.push(() => rm(dir, { recursive: true, force: true }));
  const ca = await createCA(dir, "ca");
  const cert = await issueCert(ca, dir, "server", {
    commonName: "kube-apiserver",
    ipAddresses: ["127.0.0.1"],
    usage: "server",
  });
  const server: Http2SecureServer = createSecureServer(
    { cert: cert.certPem, key: cert.keyPem },
    (req, res) => {
      res.setHeader("content-type", "application/json");
      res.end(JSON.stringify({ path: req.url, http: req.httpVersion }));
    },
  );
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  cleanups.push(() => new Promise((resolve) => server.close(resolve)));
  return { port: (server.address() as AddressInfo).port, ca: ca.certPem };
}

/**
 * A relay whose connections can go silent: nothing passes either way and nothing is closed, as
 * when a NAT, a load balancer or a TCP relay loses a connection. New connections pass.
 */
async function silenceableRelay(port: number) {
  const pairs: [Socket, Socket][] = [];
  const relay: Server = createServer((client) => {
    const upstream = connect(port, "127.0.0.1");
    for (const socket of [client, upstream]) socket.on("error", () => {});
    client.pipe(upstream);
    upstream.pipe(client);
    pairs.push([client, upstream]);
  });
  relay.listen(0, "127.0.0.1");
  await once(relay, "listening");
  cleanups.push(() => {
    for (const pair of pairs) for (const socket of pair) socket.destroy();
    return new Promise((resolve) => relay.close(resolve));
  });
  return {
    port: (relay.address() as AddressInfo).port,
    connections: () => pairs.length,
    silence() {
      for (const [client, upstream] of pairs) {
        client.unpipe(upstream);
        upstream.unpipe(client);
        client.pause();
        upstream.pause();
      }
    },
  };
}

test("a connection to the API server that goes silent is dropped at the first ping it leaves unanswered: the calls after it get a new one", async () => {
  // Found in CI: after a relay between Snooze and kube-apiserver reset its connections, every Lease
  // call and TokenReview of the autoscaler timed out for over a minute, on the one HTTP/2
  // connection they all share, while undici pinged it once a minute.
  const api = await apiServer();
  const relay = await silenceableRelay(api.port);
  const client = new KubeClient(
    { server: `https://127.0.0.1:${relay.port}`, ca: api.ca },
    { pingIntervalMs: 100 },
  );
  cleanups.push(() => client.close(100));
  expect(await client.get("/api/v1/a")).toEqual({ path: "/api/v1/a", http: "2.0" });
  expect(relay.connections()).toBe(1);
  relay.silence();
  // By the second ping after the silence (200 ms; waited 1 s, for a loaded machine) the connection is gone; the next call takes a new one.
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(await client.get("/api/v1/b", { timeoutMs: 3_000 })).toEqual({ path: "/api/v1/b", http: "2.0" });
  expect(relay.connections()).toBe(2);
});
