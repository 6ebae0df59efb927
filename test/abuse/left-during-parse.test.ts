import { connect } from "node:net";
import { afterEach, expect, test, vi } from "vitest";
import type { JsonBody } from "../../lib/http/json-body.ts";
import { httpEngine, startActivator, type TestActivator } from "./harness.ts";

/**
 * A client that leaves while its large body is parsed off the event loop (found by a probe: of 20
 * streaming requests with 300 KB bodies aborted 5 ms after sending, 6 to 20 stayed held for a cold
 * model, each with its body and a place in the queue, until the model was ready or the hold budget
 * was spent; for a ready one they went to the engine, which streamed their answers to no one). Its
 * "close" came before a hold or a relay listened for it.
 */
const parses: { release: () => void }[] = [];
let parsed = 0;
vi.mock("../../lib/http/json-off-loop.ts", async (original) => {
  const real = await original<typeof import("../../lib/http/json-off-loop.ts")>();
  return {
    ...real,
    // The parse ends when the test says: after the client has gone.
    readJsonBodyOffLoop: async (body: Buffer): Promise<JsonBody> => {
      await new Promise<void>((release) => parses.push({ release }));
      const json = await real.readJsonBodyOffLoop(body);
      parsed++;
      return json;
    },
  };
});

let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const count = 5;

/** `count` clients that send a 300 KB streaming request and leave while it is parsed. */
async function leaveDuringParse({ server, port }: TestActivator): Promise<void> {
  parsed = 0;
  const body = JSON.stringify({ model: "m", stream: true, prompt: "x".repeat(300_000) });
  for (let i = 0; i < count; i++) {
    const socket = connect(port, "127.0.0.1");
    socket.on("error", () => {});
    socket.write(
      `POST /v1/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await until(() => parses.length === i + 1, "the body to be read");
    socket.destroy();
  }
  const connections = () =>
    new Promise<number>((resolve, reject) =>
      server.getConnections((error, open) => (error ? reject(error) : resolve(open))),
    );
  await until(async () => (await connections()) === 0, "the clients to be gone");
  for (const parse of parses.splice(0)) parse.release();
  await until(() => parsed === count, "the parses");
  await new Promise((resolve) => setTimeout(resolve, 50));
}

test("a cold model: none is held, none asks for an activation, their bodies no longer count", async () => {
  snooze = await startActivator({ holdBudget: 300_000 }); // no replica ever becomes ready
  await leaveDuringParse(snooze);
  expect(snooze.activator.routes.get("m")!.held).toBe(0);
  expect(snooze.plane.demands).toEqual([]);
  const metrics = await snooze.registry.metrics();
  expect(metrics).toContain("snooze_held_body_bytes 0");
  // Counted as clients that left (before their model was named from the body: `model` empty).
  expect(metrics).toMatch(new RegExp(`snooze_requests_total\\{model="[^"]*",code="499"\\} ${count}\\n`));
});

test("a ready model: none reaches the engine, none is in flight", async () => {
  snooze = await startActivator({ holdBudget: 300_000 });
  let reached = 0;
  const engine = await httpEngine((req, res) => {
    reached++;
    req.resume();
    res.writeHead(200, { "content-type": "text/event-stream" });
    const tokens = setInterval(() => res.write("data: {}\n\n"), 20);
    res.on("close", () => clearInterval(tokens));
  });
  try {
    snooze.plane.readyAt("m", engine.address);
    await leaveDuringParse(snooze);
    expect(reached).toBe(0);
    expect(snooze.activator.routes.get("m")!.inFlight).toBe(0);
  } finally {
    engine.server.closeAllConnections();
    engine.server.close();
  }
});
