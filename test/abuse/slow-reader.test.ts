import { once } from "node:events";
import { type IncomingMessage, request } from "node:http";
import type { Socket } from "node:net";
import { afterEach, expect, test } from "vitest";
import { until } from "../helpers/local-snooze.ts";
import { chatBody, httpEngine, startActivator } from "./harness.ts";

/**
 * A client that stops reading holds the engine back instead of making the activator buffer the
 * answer, and gets every byte once it reads again. Sizes are far beyond what the sockets between
 * engine, activator and client can hold (loopback buffers grow to tens of MiB each), so a relay
 * that reads on regardless lets the engine write it all.
 */
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const piece = 1 << 20;
const pieces = 128;

/** Piece i is filled with the byte i: order and loss both show in what arrives. */
const pieceOf = (i: number) => Buffer.alloc(piece, i % 256);

/** An engine answering with `pieces` MiB as fast as it may, the activator, and a client that stopped reading once the answer began. */
async function pausedAnswer(settings: Parameters<typeof startActivator>[0] = {}) {
  const engine = { written: 0, closed: false };
  const server = await httpEngine(async (req, res) => {
    req.resume();
    res.on("close", () => {
      engine.closed = true;
    });
    res.writeHead(200, { "content-type": "application/octet-stream" });
    for (let i = 0; i < pieces && !res.destroyed; i++) {
      engine.written += piece;
      if (!res.write(pieceOf(i))) await Promise.race([once(res, "drain"), once(res, "close")]);
    }
    res.end();
  });
  cleanups.push(() => server.server.close());
  const snooze = await startActivator(settings);
  cleanups.push(() => snooze.close());
  snooze.plane.readyAt("m", server.address);
  const client = request(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
  });
  client.end(chatBody());
  const [response] = (await once(client, "response")) as [IncomingMessage];
  cleanups.push(() => response.destroy());
  expect(response.statusCode).toBe(200);
  // A cut answer shows in what arrives (a test that expects one reads it); not an unhandled error.
  response.on("error", () => {});
  client.on("error", () => {});
  response.pause();
  // The engine writes until every buffer on the way is full, then waits.
  let last = -1;
  await until(
    async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const settled = engine.written > 0 && engine.written === last;
      last = engine.written;
      return settled;
    },
    20_000,
    "the engine to stop writing",
  );
  return { engine, snooze, response };
}

/** Reads the rest of the answer, spot-checking each 64 KiB: the byte there says which piece it belongs to. */
async function readAll(response: IncomingMessage) {
  let received = 0;
  let misplaced = 0;
  response.on("data", (data: Buffer) => {
    for (let offset = 0; offset < data.length; offset += 1 << 16) {
      const at = received + offset;
      if (data[offset] !== Math.floor(at / piece) % 256) misplaced++;
    }
    received += data.length;
  });
  response.resume();
  await once(response, "end");
  return { received, misplaced };
}

test("a client that stops reading holds the engine back, and loses nothing", async () => {
  const { engine, response } = await pausedAnswer();
  expect(engine.written).toBeLessThan((pieces * piece) / 2);
  expect(await readAll(response)).toEqual({ received: pieces * piece, misplaced: 0 });
});

test("a client that stops reading for less than idleTimeout is not an engine gone quiet: nothing is cut", async () => {
  const { response } = await pausedAnswer({ idleTimeout: 8_000 });
  await new Promise((resolve) => setTimeout(resolve, 1_000));
  expect(await readAll(response)).toEqual({ received: pieces * piece, misplaced: 0 });
});

test("a client that takes nothing for idleTimeout loses its request: the engine's ends, its place is freed (found by an outside tester)", async () => {
  // It held a place on the engine, and kept the model awake, for as long as it did not read.
  const { engine, snooze, response } = await pausedAnswer({ idleTimeout: 1_000 });
  await until(() => engine.closed, 10_000, "the engine's answer to be closed");
  await until(() => snooze.activator.routes.get("m")!.inFlight === 0, 5_000, "in-flight to reach 0");
  // Its connection was closed: reading again, it finds the answer cut, not complete.
  let received = 0;
  response.on("data", (data: Buffer) => {
    received += data.length;
  });
  // Not `once`: that rejects on the error (`aborted`) a cut answer emits before it closes.
  const closed = new Promise((resolve) => response.once("close", resolve));
  response.resume();
  await closed;
  expect(response.complete).toBe(false);
  expect(received).toBeLessThan(pieces * piece);
});

test("a client that stops reading and goes away ends the engine's request and frees its place", async () => {
  const { engine, snooze, response } = await pausedAnswer();
  expect(snooze.activator.routes.get("m")!.inFlight).toBe(1);
  response.destroy();
  await until(() => engine.closed, 5_000, "the engine's answer to be closed");
  await until(() => snooze.activator.routes.get("m")!.inFlight === 0, 5_000, "in-flight to reach 0");
});

/**
 * An SSE engine streaming events as fast as it may (`res.write` back-pressure respected), the
 * activator, and a client that stopped reading once the answer began; resolves once the engine is
 * held back. `sockets` are the activator's side of the client's connection.
 */
async function pausedStream(settings: Parameters<typeof startActivator>[0]) {
  const engine = { written: 0, closed: false };
  const event = `data: {"choices":[{"delta":{"content":"${"x".repeat(1_000)}"}}]}\n\n`;
  const server = await httpEngine(async (req, res) => {
    req.resume();
    res.on("close", () => {
      engine.closed = true;
    });
    res.writeHead(200, { "content-type": "text/event-stream" });
    while (engine.written < pieces * piece && !res.destroyed) {
      engine.written += event.length;
      if (!res.write(event)) await Promise.race([once(res, "drain"), once(res, "close")]);
    }
    res.end("data: [DONE]\n\n");
  });
  cleanups.push(() => server.server.close());
  const snooze = await startActivator(settings);
  cleanups.push(() => snooze.close());
  const sockets: Socket[] = [];
  snooze.server.on("connection", (socket: Socket) => sockets.push(socket));
  snooze.plane.readyAt("m", server.address);
  const client = request(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
  });
  client.on("error", () => {});
  client.end(chatBody({ stream: true }));
  const [response] = (await once(client, "response")) as [IncomingMessage];
  cleanups.push(() => response.destroy());
  response.on("error", () => {});
  response.pause();
  let last = -1;
  await until(
    async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const settled = engine.written > 0 && engine.written === last;
      last = engine.written;
      return settled;
    },
    20_000,
    "the engine to stop writing",
  );
  return { engine, snooze, response, sockets, address: server.address };
}

test("a stream Snooze ends while its client takes none of it (its replica's drain ran out) does not keep the connection: closed after idleTimeout", async () => {
  // The error event that ends it waits behind what the client has not taken. Before, the relay's
  // watch on the client ended with the relay, and nothing else times out an answer being written:
  // the connection and its unsent bytes stayed for as long as the client kept it open.
  const { engine, snooze, sockets, address } = await pausedStream({ idleTimeout: 3_000 });
  snooze.plane.emit({
    model: "m",
    replica: "m-0",
    address,
    tier: "draining",
    since: Date.now(),
    endsAt: Date.now(),
  });
  await until(() => engine.closed, 5_000, "the engine's request to end");
  expect(snooze.activator.routes.get("m")!.inFlight).toBe(0);
  const [socket] = sockets;
  expect(socket!.destroyed).toBe(false);
  await until(() => socket!.destroyed, 10_000, "the client's connection to be closed");
});

test("a client that reads slowly but steadily is not one that takes nothing: its answer is not cut at idleTimeout (found by an outside tester)", async () => {
  // Loopback's socket buffers hold megabytes, and Node hands the kernel a batch of chunks at a time:
  // a client reading some hundreds of KiB a second empties the kernel's share, while the bytes still
  // in Node stay put for seconds. Judged by those alone, it was cut as if it had stopped reading,
  // counted a 499, with neither the rest of its answer nor an error.
  const engine = { closed: false };
  const server = await httpEngine(async (req, res) => {
    req.resume();
    res.on("close", () => {
      engine.closed = true;
    });
    res.writeHead(200, { "content-type": "application/octet-stream" });
    for (let i = 0; i < pieces && !res.destroyed; i++)
      if (!res.write(pieceOf(i))) await Promise.race([once(res, "drain"), once(res, "close")]);
    res.end();
  });
  cleanups.push(() => server.server.close());
  const snooze = await startActivator({ idleTimeout: 3_000 });
  cleanups.push(() => snooze.close());
  snooze.plane.readyAt("m", server.address);
  const client = request(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
  });
  client.on("error", () => {});
  client.end(chatBody());
  const [response] = (await once(client, "response")) as [IncomingMessage];
  cleanups.push(() => response.destroy());
  response.on("error", () => {});
  let received = 0;
  let slow = true;
  response.on("data", (data: Buffer) => {
    received += data.length;
    if (!slow) return;
    response.pause();
    setTimeout(() => response.resume(), 100);
  });
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, 9_000));
  // It read on all along, far from taking nothing for 3 s.
  expect(received / ((performance.now() - started) / 1000)).toBeGreaterThan(100_000);
  expect(engine.closed).toBe(false);
  slow = false;
  const closed = new Promise((resolve) => response.once("close", resolve));
  response.resume();
  await closed;
  expect({ complete: response.complete, received }).toEqual({ complete: true, received: pieces * piece });
});
