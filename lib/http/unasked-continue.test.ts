import { once } from "node:events";
import { type AddressInfo, connect, createServer, type Server, type Socket } from "node:net";
import { afterEach, expect, test } from "vitest";
import { type Pool, undici } from "../undici.ts";
import { dropUnaskedContinue, engineConnector } from "./unasked-continue.ts";

/**
 * A raw engine that answers the n-th request on a connection with `answers(n)`, written in the
 * pieces given (each piece a write of its own, 5 ms apart, so undici reads them apart; a number is
 * a longer wait).
 */
async function rawEngine(
  answers: (n: number) => (string | number)[],
): Promise<{ origin: string; connections: () => number }> {
  let connections = 0;
  const server = createServer((socket: Socket) => {
    connections++;
    let n = 0;
    let request = "";
    socket.on("error", () => {});
    socket.on("data", async (data) => {
      request += data.toString("latin1");
      // One request at a time, each without a body.
      while (request.includes("\r\n\r\n")) {
        request = request.slice(request.indexOf("\r\n\r\n") + 4);
        for (const piece of answers(n++)) {
          if (typeof piece === "string") socket.write(piece);
          await new Promise((resolve) => setTimeout(resolve, typeof piece === "number" ? piece : 5));
        }
      }
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  servers.push(server);
  return {
    origin: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    connections: () => connections,
  };
}

function pool(origin: string, drop = true): Pool {
  const made = new (undici().Pool)(origin, {
    connections: 1,
    pipelining: 1,
    connect: drop ? engineConnector() : undici().buildConnector({}),
  });
  pools.push(made);
  return made;
}

const servers: Server[] = [];
const pools: Pool[] = [];
afterEach(async () => {
  for (const made of pools.splice(0)) await made.destroy();
  for (const server of servers.splice(0)) server.close();
});

const ok = (body: string, extra = "") =>
  `HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: ${body.length}\r\n${extra}\r\n${body}`;

async function get(made: Pool): Promise<{ status: number; body: string; headers: Record<string, unknown> }> {
  const { statusCode, body, headers } = await made.request({ method: "GET", path: "/" });
  return { status: statusCode, body: await body.text(), headers };
}

test("undici alone destroys the connection on a 100 it did not ask for (what this works around)", async () => {
  const engine = await rawEngine(() => [`HTTP/1.1 100 Continue\r\n\r\n${ok("hi")}`]);
  await expect(get(pool(engine.origin, false))).rejects.toThrow("bad response");
});

test("100s are dropped, whole or in pieces, before each answer on a kept-alive connection", async () => {
  const body = "HTTP/1.1 100 Continue\r\n\r\n"; // an answer's body that looks like one is not touched
  const engine = await rawEngine(
    (n) =>
      [
        // Two in one write, then the answer.
        [`HTTP/1.1 100 Continue\r\nx-interim: yes\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n${ok(body)}`],
        // Byte by byte through the status line, the head cut before its end.
        [..."HTTP/1.1 100 Continue\r\n", "x: y\r\n", `\r\n${ok(body)}`],
        // A reason-less 100, a 103 (passed on: undici handles it), another 100, then the answer's head
        // and its body apart.
        [
          "HTTP/1.1 100\r\n\r\nHTTP/1.1 103 Early Hints\r\nlink: </a>\r\n\r\nHTTP/1.1 100 Continue\r\n\r\n",
          ok(body).slice(0, -body.length),
          100,
          body,
        ],
        // None at all.
        [ok(body)],
      ][n]!,
  );
  const made = pool(engine.origin);
  for (let i = 0; i < 4; i++) {
    const answer = await get(made);
    expect([i, answer.status, answer.body]).toEqual([i, 200, body]);
    expect(answer.headers["x-interim"]).toBeUndefined();
  }
  expect(engine.connections()).toBe(1);
});

test("a final status line is passed on as it comes, in pieces too", async () => {
  const engine = await rawEngine(
    (n) =>
      [
        ["HTTP/1.1 1", "00 Continue\r\n\r\n", ok("a")],
        ["HTTP/1.1 2", `04 No Content\r\n\r\n`],
        ["HTTP/1.1 404 Not Found\r\ncontent-length: 1\r\n\r\nx"],
      ][n]!,
  );
  const made = pool(engine.origin);
  expect(await get(made)).toMatchObject({ status: 200, body: "a" });
  expect((await get(made)).status).toBe(204);
  expect(await get(made)).toMatchObject({ status: 404, body: "x" });
  expect(engine.connections()).toBe(1);
});

test("between an answer's status line and the next request undici reads the socket's own read: a streamed body is not filtered", async () => {
  const engine = await rawEngine((n) => [n === 0 ? ok("a") : `HTTP/1.1 100 Continue\r\n\r\n${ok("b")}`]);
  const socket = connect({ host: "127.0.0.1", port: Number(new URL(engine.origin).port) });
  await once(socket, "connect");
  const own = socket.read;
  dropUnaskedContinue(socket);
  const answer = async () => {
    socket.write("GET / HTTP/1.1\r\nhost: engine\r\n\r\n");
    expect(socket.read).not.toBe(own);
    let text = "";
    while (!/[ab]$/.test(text)) {
      await once(socket, "readable");
      for (let chunk = socket.read(); chunk !== null; chunk = socket.read()) text += chunk;
    }
    expect(socket.read).toBe(own);
    return text;
  };
  expect(await answer()).toBe(ok("a"));
  // The next request: its answer's 100 is dropped again.
  expect(await answer()).toBe(ok("b"));
  socket.destroy();
});
