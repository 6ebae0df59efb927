import { connect, type Socket } from "node:net";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * Found by an outside tester: 64 clients that opened the status page's event stream and then read
 * no more held every stream slot (their few bytes sit in the kernel's socket buffers, so they never
 * look behind), and the page, or `snooze wake`, could not follow Snooze any more: 503
 * too_many_streams until they went. Now a new stream takes the slot of the one left unread longest,
 * else of the oldest (a reader that is there reconnects and resumes).
 */
let snooze: LocalSnooze;
const sockets: Socket[] = [];
beforeAll(async () => {
  snooze = await startWith(`
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
`);
});
afterAll(async () => {
  for (const socket of sockets) socket.destroy();
  await snooze.close(1_000);
});

/** A client that opens the stream, reads up to its `hello`, and reads nothing more. */
async function stuckReader(url: URL): Promise<Socket> {
  const socket = connect(Number(url.port), url.hostname);
  sockets.push(socket);
  socket.on("error", () => {});
  let seen = "";
  await new Promise<void>((resolve, reject) => {
    socket.on("data", (chunk: Buffer) => {
      seen += chunk.toString("latin1");
      if (seen.includes("event: hello")) {
        socket.pause();
        resolve();
      }
    });
    socket.once("close", () => reject(new Error(`closed before its hello: ${seen.slice(0, 200)}`)));
    socket.write(`GET /snooze/v1/events/stream HTTP/1.1\r\nhost: ${url.host}\r\n\r\n`);
  });
  return socket;
}

/** A client that reads the stream: the status of its answer, and its first event's name. */
async function reader(): Promise<{ status: number; first?: string }> {
  const controller = new AbortController();
  try {
    const response = await fetch(`${snooze.url}/snooze/v1/events/stream`, { signal: controller.signal });
    if (response.status !== 200) return { status: response.status };
    const body = response.body!.getReader();
    let text = "";
    while (!text.includes("\n\n", text.indexOf("event: "))) {
      const { value, done } = await body.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    return { status: 200, first: /event: (\w+)/.exec(text)?.[1] };
  } finally {
    controller.abort();
  }
}

test("64 clients that stopped reading the event stream cannot keep the status page out", {
  timeout: 60_000,
}, async () => {
  const url = new URL(snooze.url);
  for (let i = 0; i < 64; i++) await stuckReader(url);
  // Each stream the page opens gets in, and follows Snooze, however many sit unread.
  for (let i = 0; i < 5; i++) expect(await reader()).toEqual({ status: 200, first: "hello" });
  // A stream that gave its slot up is closed: its client sees the end.
  await until(
    () => sockets.some((socket) => socket.readableEnded || socket.destroyed || socket.closed),
    10_000,
    "a stuck stream ended",
  );
});
