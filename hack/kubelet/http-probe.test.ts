import { once } from "node:events";
import { createServer, type IncomingHttpHeaders } from "node:http";
import { createServer as createTlsServer } from "node:https";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import { createCA, issueServingCert } from "../../webhooks/certs/x509.ts";
import { httpProbe } from "./http-probe.ts";

let seen: { url?: string; headers: IncomingHttpHeaders }[] = [];
const server = createServer((req, res) => {
  seen.push({ url: req.url, headers: req.headers });
  res.writeHead(req.url === "/missing" ? 404 : 200);
  res.end();
});
let port = 0;
beforeAll(async () => {
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  port = (server.address() as AddressInfo).port;
});
afterAll(() => {
  server.close();
});

test("probes as the kubelet does: its kube-probe User-Agent, the probe's headers, a closed connection", async () => {
  seen = [];
  expect(await httpProbe("127.0.0.1", port, "/", 1_000, { "K-Network-Probe": "queue" })).toEqual({
    ok: true,
  });
  expect(seen[0]?.headers).toMatchObject({
    "user-agent": "kube-probe/stand-in",
    "k-network-probe": "queue",
    connection: "close",
  });
  await httpProbe("127.0.0.1", port, "/", 1_000, { "User-Agent": "mine" });
  expect(seen[1]?.headers["user-agent"]).toBe("mine");
});

test("fails on a status outside 200-399 and on a refused connection, saying which", async () => {
  expect(await httpProbe("127.0.0.1", port, "/missing", 1_000)).toEqual({ ok: false, reason: "HTTP 404" });
  const refused = await httpProbe("127.0.0.1", 1, "/", 1_000);
  expect(refused.ok).toBe(false);
});

test("scheme HTTPS speaks TLS and, as the kubelet, does not check the certificate", async () => {
  const validity = { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 3_600_000) };
  // A certificate for another name, from a CA nobody trusts: what a webhook's pod serves on its IP.
  const tls = await issueServingCert(await createCA("probe-ca", validity), ["webhook.example.svc"], validity);
  const secure = createTlsServer({ cert: tls.certPem, key: tls.keyPem }, (req, res) => {
    res.writeHead(req.url === "/ready" ? 200 : 503).end();
  });
  secure.listen(0, "127.0.0.1");
  await once(secure, "listening");
  const securePort = (secure.address() as AddressInfo).port;
  try {
    expect(await httpProbe("127.0.0.1", securePort, "/ready", 1_000, {}, "HTTPS")).toEqual({ ok: true });
    expect(await httpProbe("127.0.0.1", securePort, "/other", 1_000, {}, "HTTPS")).toEqual({
      ok: false,
      reason: "HTTP 503",
    });
    // Plain HTTP to a TLS port fails, as the kubelet's probe without the scheme would.
    expect((await httpProbe("127.0.0.1", securePort, "/ready", 1_000)).ok).toBe(false);
  } finally {
    secure.close();
  }
});
