import { connect } from "node:net";
import { afterEach, expect, test, vi } from "vitest";
import type { JsonBody } from "../../lib/http/json-body.ts";
import { startActivator, type TestActivator } from "./harness.ts";

/**
 * A client that leaves while its large body is parsed off the event loop (found by a probe: 200
 * streaming requests with 300 KB bodies aborted a few milliseconds after sending stayed held, each
 * with its body and a place in the queue, until the model was ready or the hold budget was spent,
 * and each signalled demand). Its "close" came before the request was held, so nothing took it out.
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

const connections = (server: TestActivator["server"]) =>
  new Promise<number>((resolve, reject) =>
    server.getConnections((error, count) => (error ? reject(error) : resolve(count))),
  );

async function until(predicate: () => boolean | Promise<boolean>, what: string): Promise<void> {
  for (let i = 0; i < 500; i++) {
    if (await predicate()) return;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  throw new Error(`timed out waiting for ${what}`);
}

test("a client gone during its body's parse is not held: the queue is empty, its hold counted abandoned", async () => {
  snooze = await startActivator({ holdBudget: 300_000 }); // no replica ever becomes ready
  const { activator, server, port } = snooze;
  const count = 5;
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
  await until(async () => (await connections(server)) === 0, "the clients to be gone");
  for (const parse of parses.splice(0)) parse.release();
  await until(() => parsed === count, "the parses");
  await new Promise((resolve) => setImmediate(resolve));

  expect(activator.routes.get("m")!.held).toBe(0);
  const metrics = await snooze.registry.metrics();
  expect(metrics).toContain('snooze_held_requests{model="m"} 0');
  expect(metrics).toContain(`snooze_hold_duration_seconds_count{model="m",outcome="abandoned"} ${count}`);
});
