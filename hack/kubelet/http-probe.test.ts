import { once } from "node:events";
import { createServer, type IncomingHttpHeaders } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
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
