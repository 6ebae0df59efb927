/**
 * A minimal streaming engine for the streaming benchmark: it answers like
 * vLLM's chat API (SSE `chat.completion.chunk` events, then `data: [DONE]`)
 * but spends next to no CPU of its own, so the machine's two cores go to the
 * proxy being measured. Like a vLLM decode step, one timer tick emits the next
 * token of every running stream, one write per token (vLLM merges tokens of a
 * stream that fell behind; this engine never does, so a "chunk" is always one
 * event and one write). When the machine is too busy for a tick every `itl`,
 * fewer tokens are offered; the direct row of the benchmark shows how many.
 *
 *   node hack/bench/sse-upstream.ts --port 8000 [--itl 10]
 *
 * `GET /health` answers 200; a non-streaming POST gets one small JSON answer.
 */
import { createServer, type ServerResponse } from "node:http";
import { parseArgs } from "node:util";
import { listenActivator } from "../../activator/listen.ts";

const { values } = parseArgs({
  options: { port: { type: "string" }, itl: { type: "string", default: "10" } },
});
const port = Number(values.port);
const itlMs = Number(values.itl);

/** One token's event, shaped and sized as vLLM's. */
export function chunkEvent(index: number): string {
  return `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench","choices":[{"index":0,"delta":{"content":" tok${index % 10}"},"logprobs":null,"finish_reason":null}]}\n\n`;
}
const events = Array.from({ length: 10 }, (_, i) => chunkEvent(i));
const answer = JSON.stringify({
  id: "cmpl-bench",
  object: "text_completion",
  created: 1700000000,
  model: "bench",
  choices: [{ index: 0, text: " ok", logprobs: null, finish_reason: "length", stop_reason: null }],
  usage: { prompt_tokens: 2, total_tokens: 3, completion_tokens: 1 },
});

interface Stream {
  res: ServerResponse;
  left: number;
}
const running = new Set<Stream>();

setInterval(() => {
  for (const stream of running) {
    if (stream.res.destroyed) {
      running.delete(stream);
      continue;
    }
    // A reader that does not keep up gets nothing this step (its token is dropped):
    // the engine does not buffer without bound for a slow client or proxy.
    if (stream.res.writableNeedDrain) continue;
    const event = events[stream.left % events.length]!;
    if (--stream.left === 0) {
      stream.res.end(`${event}data: [DONE]\n\n`);
      running.delete(stream);
    } else stream.res.write(event);
  }
}, itlMs);

const server = createServer((req, res) => {
  // How many streams it still feeds: the bench waits for 0 between targets, so that streams a
  // target left open cannot tax the next one.
  if (req.url === "/running") {
    res.end(String(running.size));
    return;
  }
  if (req.url === "/health") {
    res.writeHead(200, { "content-length": 0 });
    res.end();
    return;
  }
  const chunks: Buffer[] = [];
  req.on("data", (chunk: Buffer) => chunks.push(chunk));
  req.on("end", () => {
    let body: { stream?: boolean; max_tokens?: number } = {};
    try {
      body = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    } catch {}
    if (!body.stream) {
      res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
      res.end(answer);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.flushHeaders();
    running.add({ res, left: Math.max(1, body.max_tokens ?? 16) });
  });
});
// As the activator listens (activator/listen.ts): with a thousand streams fed every tick, a single
// listening socket gave up about one connection per tick (libuv takes one connection per epoll
// report), so a burst of 1,000 connections took seconds to be accepted whatever was in front
// of the engine, and each stream's first event measured this engine, not the proxy. The backlog
// (4,096) also keeps the burst from overflowing into SYN retransmissions, as a backlog of 511 did.
await listenActivator(server, { port, host: "127.0.0.1" });
process.on("SIGTERM", () => process.exit(0));
