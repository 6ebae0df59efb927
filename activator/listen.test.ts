import { execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { expect, test } from "vitest";
import { acceptors, acceptorsWithin, listenActivator } from "./listen.ts";

const listeningSockets = (port: number) =>
  execFileSync("ss", ["-ltnH", `( sport = :${port} )`], { encoding: "utf8" })
    .trim()
    .split("\n");

test.runIf(process.platform === "linux")(
  "the activator's port has several listening sockets, all answering through the one HTTP server",
  async () => {
    const server = createHttpServer((_req, res) => res.end("ok"));
    const listening = await listenActivator(server, { port: 0, host: "127.0.0.1" });
    try {
      expect(acceptors).toBeGreaterThan(1);
      expect(listeningSockets(listening.address.port)).toHaveLength(acceptors);
      // New connections land on the sockets by hash: enough of them reach every one.
      const answers = await Promise.all(
        Array.from({ length: 64 }, () =>
          fetch(`http://127.0.0.1:${listening.address.port}/`, { headers: { connection: "close" } }).then(
            (r) => r.text(),
          ),
        ),
      );
      expect(answers).toEqual(Array(64).fill("ok"));
    } finally {
      listening.close();
      server.closeAllConnections();
    }
    // Closed: no socket listens on the port any more.
    expect(listeningSockets(listening.address.port).filter(Boolean)).toHaveLength(0);
  },
);

test.runIf(process.platform === "linux")(
  "every socket gets the HTTP server's own socket options, whichever listening socket accepted it",
  async () => {
    const server = createHttpServer((_req, res) => res.end("ok"));
    // Node keeps a socket's TCP_NODELAY request as this field; there is no public getter.
    const noDelayOf = (socket: object) => {
      const field = Object.getOwnPropertySymbols(socket).find((s) => s.description === "kSetNoDelay");
      return field ? (socket as Record<symbol, unknown>)[field] : "no kSetNoDelay field";
    };
    const seen: unknown[] = [];
    server.on("connection", (socket) => seen.push([noDelayOf(socket), socket.allowHalfOpen]));
    const listening = await listenActivator(server, { port: 0, host: "127.0.0.1" });
    try {
      await Promise.all(
        Array.from({ length: 64 }, () =>
          fetch(`http://127.0.0.1:${listening.address.port}/`, { headers: { connection: "close" } }).then(
            (r) => r.text(),
          ),
        ),
      );
      expect(seen).toEqual(Array(64).fill([true, true]));
    } finally {
      listening.close();
      server.closeAllConnections();
    }
  },
);

test("a port another process listens on fails with EADDRINUSE, even one shared with SO_REUSEPORT", async () => {
  for (const reusePort of process.platform === "linux" ? [false, true] : [false]) {
    const other = createServer();
    other.listen({ port: 0, host: "127.0.0.1", ...(reusePort ? { reusePort } : {}) });
    await once(other, "listening");
    const { port } = other.address() as { port: number };
    try {
      const server = createHttpServer();
      await expect(listenActivator(server, { port, host: "127.0.0.1" })).rejects.toMatchObject({
        code: "EADDRINUSE",
      });
      expect(server.listening).toBe(false);
    } finally {
      other.close();
    }
  }
});

test("the acceptors a descriptor limit leaves room for: 128, an eighth of a small limit, at least 1", () => {
  expect(acceptorsWithin(undefined)).toBe(128);
  expect(acceptorsWithin(1_048_576)).toBe(128);
  expect(acceptorsWithin(1024)).toBe(128);
  expect(acceptorsWithin(400)).toBe(50);
  expect(acceptorsWithin(120)).toBe(15);
  expect(acceptorsWithin(7)).toBe(1);
});
