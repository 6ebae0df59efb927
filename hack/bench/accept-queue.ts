/**
 * Where new streams wait when many open at once: opens `--streams` SSE streams through a fresh
 * activator (or the minimal Node.js proxy, `--target minimal`) on the streaming benchmark's engine,
 * twice, and every 2 s prints how many have their first event and how many connections still sit
 * unaccepted in the proxy's accept queue (the listening socket's Recv-Q, read with `ss`). It is how
 * docs/benchmarks.md found that a fresh process's first burst leaves connections unaccepted while
 * the others stream, and a second burst does not. Linux only (ss).
 *
 *   node hack/bench/accept-queue.ts [--streams 1000] [--target activator|minimal] [--seconds 12]
 */
import { mkdtempSync, writeFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";
import { startActivator } from "./activator.ts";
import { postJson, yamlArgv } from "./context.ts";
import { receiveQueues } from "./proc.ts";
import { startNodeProxy } from "./server-process.ts";

const { values } = parseArgs({
  options: {
    streams: { type: "string", default: "1000" },
    target: { type: "string", default: "activator" },
    acceptors: { type: "string", default: "1" },
    seconds: { type: "string", default: "12" },
  },
});
const streams = Number(values.streams);
const seconds = Number(values.seconds);
const script = (name: string) => fileURLToPath(new URL(name, import.meta.url));

const config = join(mkdtempSync(join(tmpdir(), "snooze-accept-")), "snooze.yaml");
const engine = [process.execPath, script("./sse-upstream.ts"), "--port", "${PORT}", "--itl", "10"];
writeFileSync(
  config,
  `models:\n  bench:\n    sleep: false\n    warmup: false\n    sleepAfter: 1h\n    command: ${yamlArgv(engine)}\n`,
);
const activator = await startActivator(config);
const stops: (() => Promise<void>)[] = [() => activator.close()];
try {
  await postJson(`${activator.url}/v1/chat/completions`, { model: "bench", max_tokens: 1 });
  let origin = activator.url;
  if (values.target === "minimal") {
    const upstream = (await activator.route("bench")).address!;
    const proxy = await startNodeProxy("minimal-proxy", upstream, ["--acceptors", String(values.acceptors)]);
    stops.unshift(() => proxy.stop());
    origin = proxy.url;
  }
  for (const burst of [1, 2]) console.log(`burst ${burst}: ${await watchBurst(new URL(origin))}`);
} finally {
  for (const stop of stops) await stop();
}

/** Opens the streams, watches them for `seconds`, closes them; returns the samples. */
async function watchBurst(url: URL): Promise<string> {
  const body = JSON.stringify({
    model: "bench",
    messages: [{ role: "user", content: "x" }],
    stream: true,
    max_tokens: 1e6,
  });
  const request =
    `POST /v1/chat/completions HTTP/1.1\r\nHost: ${url.host}\r\nContent-Type: application/json\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;
  let started = 0;
  const sockets: Socket[] = [];
  for (let i = 0; i < streams; i++) {
    const socket = connect(Number(url.port), url.hostname);
    let seen = false;
    socket.once("connect", () => socket.write(request));
    socket.on("data", (chunk: Buffer) => {
      if (!seen && chunk.includes("data: ")) {
        seen = true;
        started++;
      }
    });
    socket.on("error", () => {});
    sockets.push(socket);
  }
  const samples: string[] = [];
  for (let at = 2; at <= seconds; at += 2) {
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    // One queue per listening socket (several with --acceptors): summed.
    const unaccepted = receiveQueues(Number(url.port), "listening").reduce((sum, n) => sum + n, 0);
    samples.push(`${at} s: ${started} started, ${unaccepted} unaccepted`);
  }
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => setTimeout(resolve, 2_000));
  return samples.join("; ");
}
