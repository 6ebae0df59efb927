import { connect } from "node:net";
import { afterEach, expect, test } from "vitest";
import { startActivator, type TestActivator } from "./harness.ts";

/**
 * A client whose upload Node's parser refuses (a bad chunk) goes on sending the rest of its body
 * before it reads the answer, as most clients do (Python's requests and httpx, curl). Found by an
 * outside tester: the connection was closed as soon as the 400 was written, the client's later bytes
 * made the kernel reset it, and the client saw "Broken pipe" or "Connection reset" instead of the 400.
 * Now the connection reads and drops the rest until the client closes its side (lib/http/client-error.ts).
 */
let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

/**
 * Sends the head, a bad chunk and `restBytes` more, reading nothing until all is sent; then reads,
 * having closed its side when `end`.
 */
function uploadThenRead(
  port: number,
  restBytes: number,
  end = true,
): Promise<{ reply: string; error?: string }> {
  return new Promise((resolve) => {
    // Half-open allowed, as a Python socket is: the server's FIN does not end this side's writes.
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    socket.pause();
    socket.setEncoding("latin1");
    let reply = "";
    let error: string | undefined;
    const timer = setTimeout(() => socket.destroy(new Error("no close within 10 s")), 10_000);
    socket.on("data", (chunk: string) => {
      reply += chunk;
    });
    socket.on("error", (e) => {
      error ??= e.message;
    });
    socket.on("close", () => {
      clearTimeout(timer);
      resolve({ reply, error });
    });
    socket.once("connect", async () => {
      socket.write(
        "POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
      );
      const block = Buffer.alloc(64 * 1024, "a");
      for (let sent = 0; sent < restBytes && !socket.destroyed; sent += block.length)
        if (!socket.write(block)) await new Promise((resolve) => socket.once("drain", resolve));
      if (socket.destroyed) return;
      if (end) socket.end();
      socket.resume();
    });
  });
}

test("a client still uploading when its body is refused reads the 400, not a reset", async () => {
  snooze = await startActivator();
  const { reply, error } = await uploadThenRead(snooze.port, 8 * 1024 * 1024);
  expect(error).toBeUndefined();
  expect(reply).toMatch(/^HTTP\/1\.1 400 /);
  expect(reply).toContain('"code":"malformed_request"');
  expect(reply).toContain("Invalid character in chunk size");
});

test("a refused client that sends nothing more and never closes its side is closed after the linger", async () => {
  snooze = await startActivator();
  const socket = connect({ port: snooze.port, host: "127.0.0.1", allowHalfOpen: true });
  const failed = new Promise<string>((resolve) => socket.once("error", (e) => resolve(e.message)));
  let reply = "";
  socket.setEncoding("latin1");
  socket.on("data", (chunk: string) => {
    reply += chunk;
  });
  const ended = new Promise((resolve) => socket.once("end", resolve));
  socket.write(
    "POST /v1/chat/completions HTTP/1.1\r\nHost: m\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
  );
  await ended;
  expect(reply).toMatch(/^HTTP\/1\.1 400 /);
  // Past the 2 s the server waits for a byte (lib/http/client-error.ts) its end is closed too: a
  // byte sent now is answered by a reset, which the next write reports (EPIPE), not read and
  // dropped by a connection left open.
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  socket.write("x");
  await new Promise((resolve) => setTimeout(resolve, 200));
  socket.write("y");
  expect(await failed).toMatch(/EPIPE|ECONNRESET/);
  socket.destroy();
});
