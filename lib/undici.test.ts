import { once } from "node:events";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import * as undici from "undici";
import { afterAll, expect, test } from "vitest";
import { undici as dispatchers } from "./undici.ts";

const { Agent, buildConnector, Pool } = dispatchers();

const server = createServer((req, res) => res.end(`${req.method} ${req.url}`));
server.listen(0, "127.0.0.1");
await once(server, "listening");
const origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
afterAll(() => new Promise((resolve) => server.close(resolve)));

test("Pool and Agent are the package's own classes", () => {
  expect(Pool).toBe(undici.Pool);
  expect(Agent).toBe(undici.Agent);
  expect(buildConnector).toBe(undici.buildConnector);
});

test("a Pool and an Agent answer request() as the package's do", async () => {
  const pool = new Pool(origin);
  const agent = new Agent();
  try {
    const a = await pool.request({ method: "GET", path: "/pool" });
    expect(await a.body.text()).toBe("GET /pool");
    const b = await agent.request({ origin, method: "POST", path: "/agent?x=1", body: "{}" });
    expect([b.statusCode, await b.body.text()]).toEqual([200, "POST /agent?x=1"]);
  } finally {
    await Promise.all([pool.close(), agent.close()]);
  }
});
