import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, expect, test } from "vitest";
import { type Pool, undici } from "../lib/undici.ts";
import { waitFor } from "../test/sim/helpers.ts";
import { SpareConnections } from "./spare-connections.ts";

/** An engine stand-in that counts the connections it accepted and keeps them for the test. */
async function engine(): Promise<{ server: Server; origin: URL; sockets: Socket[] }> {
  const sockets: Socket[] = [];
  const server = createServer((req, res) => res.end(`${req.method} ${req.url}`));
  server.on("connection", (socket) => sockets.push(socket));
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const origin = new URL(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  servers.push(server);
  return { server, origin, sockets };
}

/** Spares to `origin` and a pool that takes them, as model-route.ts pairs them; closed after the test. */
function pooled(
  origin: URL,
  connections: number,
  options: ConstructorParameters<typeof SpareConnections>[1] = {},
) {
  const spares = new SpareConnections(origin, options);
  const pool = new (undici().Pool)(origin, { connections, pipelining: 1, connect: spares.connect });
  opened.push({ spares, pool });
  return { spares, pool };
}

const servers: Server[] = [];
const opened: { spares: SpareConnections; pool: Pool }[] = [];
afterEach(async () => {
  for (const { spares, pool } of opened.splice(0)) {
    spares.close();
    await pool.close();
  }
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

test("spares are opened ahead and the pool's requests go out on them, not on new connections", async () => {
  const { origin, sockets } = await engine();
  const { spares, pool } = pooled(origin, 8);
  spares.fill(3);
  spares.fill(3); // already opening: no more
  expect(spares.count).toBe(3);
  await waitFor(() => sockets.length === 3);
  const answers = await Promise.all(
    [1, 2, 3].map(async (i) => (await pool.request({ method: "GET", path: `/${i}` })).body.text()),
  );
  expect(answers).toEqual(["GET /1", "GET /2", "GET /3"]);
  expect(sockets.length).toBe(3);
  expect(spares.count).toBe(0);
  // With none left, the pool reuses the three (once it counts them free again) and connects for itself.
  await waitFor(() => pool.stats.free === 3);
  const more = await Promise.all(
    [4, 5, 6, 7].map(async (i) => (await pool.request({ method: "GET", path: `/${i}` })).body.text()),
  );
  expect(more).toEqual(["GET /4", "GET /5", "GET /6", "GET /7"]);
  expect(sockets.length).toBe(4);
});

test("a request that comes while spares are still opening takes one of them, not a connection of its own", async () => {
  const { origin, sockets } = await engine();
  const { spares, pool } = pooled(origin, 8);
  spares.fill(2);
  const answers = await Promise.all(
    [1, 2, 3].map(async (i) => (await pool.request({ method: "GET", path: `/${i}` })).body.text()),
  );
  expect(answers).toEqual(["GET /1", "GET /2", "GET /3"]);
  // Two waited for the two spares on their way; the third dialed.
  expect(sockets.length).toBe(3);
  spares.fill(2);
  spares.release(); // still opening: closed when they arrive
  await waitFor(() => sockets.length === 5);
  await waitFor(() => sockets.slice(3).every((socket) => socket.destroyed));
});

test("a spare the engine closed is dropped, and the request goes out on a new connection", async () => {
  const { origin, sockets } = await engine();
  const { spares, pool } = pooled(origin, 4);
  spares.fill(2);
  await waitFor(() => sockets.length === 2);
  for (const socket of sockets) socket.destroy();
  await waitFor(() => spares.count === 0);
  const answer = await pool.request({ method: "POST", path: "/v1/chat/completions", body: "{}" });
  expect(await answer.body.text()).toBe("POST /v1/chat/completions");
  expect(sockets.length).toBe(3);
});

test("a spare older than maxAgeMs is not used: the engine may be closing it", async () => {
  const { origin, sockets } = await engine();
  let now = 1_000;
  const { spares, pool } = pooled(origin, 4, { maxAgeMs: 30_000, now: () => now });
  spares.fill(1);
  await waitFor(() => sockets.length === 1);
  now += 30_001;
  const answer = await pool.request({ method: "GET", path: "/late" });
  expect(await answer.body.text()).toBe("GET /late");
  expect(sockets.length).toBe(2);
  await waitFor(() => sockets[0]!.destroyed);
});

test("release closes the spares left; close also those still opening, and fill does nothing after it", async () => {
  const { origin, sockets } = await engine();
  const spares = new SpareConnections(origin);
  spares.fill(2);
  await waitFor(() => sockets.length === 2);
  spares.release();
  expect(spares.count).toBe(0);
  await waitFor(() => sockets.every((socket) => socket.destroyed));
  spares.fill(2); // still usable after a release
  spares.close(); // both still opening
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(spares.count).toBe(0);
  await waitFor(() => sockets.length === 4 && sockets.every((socket) => socket.destroyed));
  spares.fill(5);
  expect(spares.count).toBe(0);
});

test("a spare that cannot connect is forgotten; the pool's own connect reports the error", async () => {
  const { server, origin } = await engine();
  await new Promise((resolve) => server.close(resolve));
  const { spares, pool } = pooled(origin, 1);
  spares.fill(2);
  await waitFor(() => spares.count === 0);
  await expect(pool.request({ method: "GET", path: "/" })).rejects.toMatchObject({ code: "ECONNREFUSED" });
});
