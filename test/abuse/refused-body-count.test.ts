import { connect } from "node:net";
import { afterEach, expect, test } from "vitest";
import { startActivator, type TestActivator } from "./harness.ts";

/**
 * A request whose body Node's parser refuses (a bad chunk, the connection ending inside the body)
 * is answered the parser's 400 while its handler is still reading that body; the handler then saw
 * the connection close and counted a client gone. Found by an outside tester: each such request was
 * counted twice in `snooze_requests_total`, as 400 and as 499, where the client saw one 400.
 */
let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

/** Writes `parts` (`"END"` half-closes the connection) and returns everything read until it closes. */
function exchange(port: number, parts: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, "127.0.0.1");
    socket.setEncoding("latin1");
    let reply = "";
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`the connection was not closed; got ${JSON.stringify(reply)}`));
    }, 5_000);
    socket.on("data", (chunk: string) => {
      reply += chunk;
    });
    socket.on("error", () => {});
    socket.on("close", () => {
      clearTimeout(timer);
      resolve(reply);
    });
    (async () => {
      for (const part of parts) {
        if (part === "END") socket.end();
        else socket.write(part);
        // Each part on its own: the handler is reading the body when the refusal comes.
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    })();
  });
}

/** The `snooze_requests_total` series that are not zero, as `{labels} value` lines. */
async function requestCounts(activator: TestActivator): Promise<string[]> {
  const text = await activator.registry.metrics();
  return text.split("\n").filter((line) => line.startsWith("snooze_requests_total{"));
}

test("a bad chunk in the body is counted once, as the 400 the client was answered", async () => {
  snooze = await startActivator();
  const reply = await exchange(snooze.port, [
    "POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
    '5\r\n{"mod\r\n',
    "zz\r\n",
  ]);
  expect(reply).toMatch(/^HTTP\/1\.1 400 /);
  expect(reply).toContain('"code":"malformed_request"');
  expect(await requestCounts(snooze)).toEqual(['snooze_requests_total{model="",code="400"} 1']);
});

test("a body cut short by the client's half-close is counted once, as the 400 it was answered", async () => {
  snooze = await startActivator();
  const reply = await exchange(snooze.port, [
    "POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n",
    '{"model":"m"',
    "END",
  ]);
  expect(reply).toMatch(/^HTTP\/1\.1 400 /);
  expect(reply).toContain("Invalid EOF state");
  expect(await requestCounts(snooze)).toEqual(['snooze_requests_total{model="",code="400"} 1']);
});

test("a client that leaves in the middle of its body is still one 499", async () => {
  snooze = await startActivator();
  const socket = connect(snooze.port, "127.0.0.1");
  socket.on("error", () => {});
  socket.write(
    'POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{"model":"m"',
  );
  await new Promise((resolve) => setTimeout(resolve, 50));
  socket.resetAndDestroy();
  for (let i = 0; i < 100 && (await requestCounts(snooze)).length === 0; i++)
    await new Promise((resolve) => setTimeout(resolve, 10));
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(await requestCounts(snooze)).toEqual(['snooze_requests_total{model="",code="499"} 1']);
});
