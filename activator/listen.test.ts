import { execFile, execFileSync } from "node:child_process";
import { once } from "node:events";
import { createServer as createHttpServer } from "node:http";
import { createServer } from "node:net";
import { expect, test } from "vitest";
import { freePort } from "../lib/free-port.ts";
import { foreignListenersIn } from "./foreign-listeners.ts";
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

// Found by an outside tester: two `snooze serve` started together on one port could both pass the
// port's check before either listened, and then both served it, each taking a share of its
// connections (7 of 30 pairs). One of each pair listens now; the other fails with EADDRINUSE.
test.runIf(process.platform === "linux")(
  "of two processes that listen on one port at the same moment, one gets it and the other EADDRINUSE",
  async () => {
    const listenAt = (port: number, at: number) =>
      new Promise<string>((resolve, reject) => {
        const script = `
          import { createServer } from "node:http";
          import { listenActivator } from ${JSON.stringify(new URL("./listen.ts", import.meta.url).href)};
          await new Promise((r) => setTimeout(r, ${at} - Date.now()));
          const outcome = await listenActivator(createServer(), { port: ${port}, host: "127.0.0.1" })
            .then(() => "listening", (error) => error.code);
          console.log(outcome);
          // Kept a moment, so the other one, later, still finds it there.
          setTimeout(() => process.exit(0), 1000);`;
        execFile(
          process.execPath,
          ["--input-type=module", "-e", script],
          { timeout: 20_000 },
          (error, stdout) => (error ? reject(error) : resolve(stdout.trim())),
        );
      });
    const pairs = await Promise.all(
      Array.from({ length: 12 }, async () => {
        const port = await freePort();
        const at = Date.now() + 1500;
        return (await Promise.all([listenAt(port, at), listenAt(port, at)])).sort();
      }),
    );
    expect(pairs).toEqual(Array(12).fill(["EADDRINUSE", "listening"]));
  },
  30_000,
);

test("a listening socket of another process on the same address and port is told apart from ours", () => {
  const table = (...rows: string[]) =>
    [
      "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode",
      ...rows,
    ].join("\n");
  const row = (local: string, state: string, inode: string) =>
    `   0: ${local} 00000000:0000 ${state} 00000000:00000000 00:00000000 00000000  1000        0 ${inode} 1 0000000000000000 100 0 0 10 0`;
  const tcp = table(
    row("0100007F:1F90", "0A", "11"),
    row("0100007F:1F90", "0A", "12"),
    row("0100007F:1F90", "0A", "99"), // another process's, beside ours
    row("0200007F:1F90", "0A", "98"), // another address: no conflict
    row("0100007F:1F91", "0A", "97"), // another port
    row("0100007F:1F90", "01", "96"), // a connection, not a listener
  );
  expect(foreignListenersIn(8080, [tcp], new Set(["11", "12"]))).toBe(1);
  expect(foreignListenersIn(8080, [tcp], new Set(["11", "12", "99"]))).toBe(0);
  // Not listening there ourselves: nothing to share.
  expect(foreignListenersIn(8080, [tcp], new Set(["5"]))).toBe(0);
});

test("the acceptors a descriptor limit leaves room for: 128, an eighth of a small limit, at least 1", () => {
  expect(acceptorsWithin(undefined)).toBe(128);
  expect(acceptorsWithin(1_048_576)).toBe(128);
  expect(acceptorsWithin(1024)).toBe(128);
  expect(acceptorsWithin(400)).toBe(50);
  expect(acceptorsWithin(120)).toBe(15);
  expect(acceptorsWithin(7)).toBe(1);
});
