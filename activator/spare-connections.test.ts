import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { afterEach, expect, test } from "vitest";
import { Pool } from "../lib/undici.ts";
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

const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

const until = async (check: () => boolean) => {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(check()).toBe(true);
};

test("spares are opened ahead and the pool's requests go out on them, not on new connections", async () => {
  const { origin, sockets } = await engine();
  const spares = new SpareConnections(origin);
  const pool = new Pool(origin, { connections: 8, pipelining: 1, connect: spares.connect });
  try {
    spares.fill(3);
    spares.fill(3); // already opening: no more
    expect(spares.count).toBe(3);
    await until(() => sockets.length === 3);
    const answers = await Promise.all(
      [1, 2, 3].map(async (i) => (await pool.request({ method: "GET", path: `/${i}` })).body.text()),
    );
    expect(answers).toEqual(["GET /1", "GET /2", "GET /3"]);
    expect(sockets.length).toBe(3);
    expect(spares.count).toBe(0);
    // With none left, the pool reuses the three (once it counts them free again) and connects for itself.
    await until(() => pool.stats.free === 3);
    const more = await Promise.all(
      [4, 5, 6, 7].map(async (i) => (await pool.request({ method: "GET", path: `/${i}` })).body.text()),
    );
    expect(more).toEqual(["GET /4", "GET /5", "GET /6", "GET /7"]);
    expect(sockets.length).toBe(4);
  } finally {
    spares.close();
    await pool.close();
  }
});

test("a request that comes while spares are still opening takes one of them, not a connection of its own", async () => {
  const { origin, sockets } = await engine();
  const spares = new SpareConnections(origin);
  const pool = new Pool(origin, { connections: 8, pipelining: 1, connect: spares.connect });
  try {
    spares.fill(2);
    const answers = await Promise.all(
      [1, 2, 3].map(async (i) => (await pool.request({ method: "GET", path: `/${i}` })).body.text()),
    );
    expect(answers).toEqual(["GET /1", "GET /2", "GET /3"]);
    // Two waited for the two spares on their way; the third dialed.
    expect(sockets.length).toBe(3);
    spares.fill(2);
    spares.release(); // still opening: closed when they arrive
    await until(() => sockets.length === 5);
    await until(() => sockets.slice(3).every((socket) => socket.destroyed));
  } finally {
    spares.close();
    await pool.close();
  }
});

test("a spare the engine closed is dropped, and the request goes out on a new connection", async () => {
  const { origin, sockets } = await engine();
  const spares = new SpareConnections(origin);
  const pool = new Pool(origin, { connections: 4, pipelining: 1, connect: spares.connect });
  try {
    spares.fill(2);
    await until(() => sockets.length === 2);
    for (const socket of sockets) socket.destroy();
    await until(() => spares.count === 0);
    const answer = await pool.request({ method: "POST", path: "/v1/chat/completions", body: "{}" });
    expect(await answer.body.text()).toBe("POST /v1/chat/completions");
    expect(sockets.length).toBe(3);
  } finally {
    spares.close();
    await pool.close();
  }
});

test("a spare older than maxAgeMs is not used: the engine may be closing it", async () => {
  const { origin, sockets } = await engine();
  let now = 1_000;
  const spares = new SpareConnections(origin, { maxAgeMs: 30_000, now: () => now });
  const pool = new Pool(origin, { connections: 4, pipelining: 1, connect: spares.connect });
  try {
    spares.fill(1);
    await until(() => sockets.length === 1);
    now += 30_001;
    const answer = await pool.request({ method: "GET", path: "/late" });
    expect(await answer.body.text()).toBe("GET /late");
    expect(sockets.length).toBe(2);
    await until(() => sockets[0]!.destroyed);
  } finally {
    spares.close();
    await pool.close();
  }
});

test("release closes the spares left; close also those still opening, and fill does nothing after it", async () => {
  const { origin, sockets } = await engine();
  const spares = new SpareConnections(origin);
  spares.fill(2);
  await until(() => sockets.length === 2);
  spares.release();
  expect(spares.count).toBe(0);
  await until(() => sockets.every((socket) => socket.destroyed));
  spares.fill(2); // still usable after a release
  spares.close(); // both still opening
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(spares.count).toBe(0);
  await until(() => sockets.length === 4 && sockets.every((socket) => socket.destroyed));
  spares.fill(5);
  expect(spares.count).toBe(0);
});

test("a spare that cannot connect is forgotten; the pool's own connect reports the error", async () => {
  const { server, origin } = await engine();
  await new Promise((resolve) => server.close(resolve));
  const spares = new SpareConnections(origin);
  const pool = new Pool(origin, { connections: 1, pipelining: 1, connect: spares.connect });
  try {
    spares.fill(2);
    await until(() => spares.count === 0);
    await expect(pool.request({ method: "GET", path: "/" })).rejects.toMatchObject({ code: "ECONNREFUSED" });
  } finally {
    spares.close();
    await pool.close();
  }
});
