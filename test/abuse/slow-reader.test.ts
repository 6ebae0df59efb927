import { once } from "node:events";
import { request } from "node:http";
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

test("a client that stops reading holds the engine back, and loses nothing", async () => {
  let written = 0;
  const engine = await httpEngine(async (req, res) => {
    req.resume();
    res.writeHead(200, { "content-type": "application/octet-stream" });
    for (let i = 0; i < pieces && !res.destroyed; i++) {
      written += piece;
      if (!res.write(pieceOf(i))) await once(res, "drain");
    }
    res.end();
  });
  cleanups.push(() => engine.server.close());
  const snooze = await startActivator();
  cleanups.push(() => snooze.close());
  snooze.plane.readyAt("m", engine.address);

  const client = request(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
  });
  client.end(chatBody());
  const [response] = (await once(client, "response")) as [import("node:http").IncomingMessage];
  cleanups.push(() => response.destroy());
  expect(response.statusCode).toBe(200);
  response.pause();

  // The engine writes until every buffer on the way is full, then waits.
  let last = -1;
  await until(
    async () => {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const settled = written > 0 && written === last;
      last = written;
      return settled;
    },
    20_000,
    "the engine to stop writing",
  );
  expect(written).toBeLessThan((pieces * piece) / 2);

  let received = 0;
  let misplaced = 0;
  response.on("data", (data: Buffer) => {
    // Spot-check each 64 KiB: the byte there says which piece it belongs to.
    for (let offset = 0; offset < data.length; offset += 1 << 16) {
      const at = received + offset;
      if (data[offset] !== Math.floor(at / piece) % 256) misplaced++;
    }
    received += data.length;
  });
  response.resume();
  await once(response, "end");
  expect({ received, misplaced }).toEqual({ received: pieces * piece, misplaced: 0 });
});
