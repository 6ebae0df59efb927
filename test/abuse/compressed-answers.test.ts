import { constants, createGzip, gzipSync } from "node:zlib";
import OpenAI from "openai";
import { afterEach, describe, expect, test } from "vitest";
import { chatBody, chunk, httpEngine, rawEngine, startActivator } from "./harness.ts";

/**
 * An engine that compresses its answers (it, or a proxy in front of it, honours the client's
 * `Accept-Encoding`, which Snooze passes on). Found by an outside tester: a gzip SSE stream was
 * held back whole (Snooze looked for the ends of events in the compressed bytes), and into a
 * stream hold progress had opened it arrived as binary garbage.
 */
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

const delta = (content: string) =>
  `data: ${JSON.stringify({ id: "c1", object: "chat.completion.chunk", created: 0, model: "m", choices: [{ index: 0, delta: { content }, finish_reason: null }] })}\n\n`;

/** An engine that streams `parts` gzip-compressed, each flushed, the rest once `go` resolves. */
async function gzipStreamingEngine(go: Promise<unknown>, options: { always?: boolean } = {}) {
  const seen: (string | undefined)[] = [];
  let restSent = false;
  const engine = await httpEngine((req, res) => {
    req.resume();
    seen.push(req.headers["accept-encoding"]);
    if (!options.always && !/gzip/.test(String(req.headers["accept-encoding"]))) {
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.end(`${delta("a")}${delta("b")}data: [DONE]\n\n`);
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream", "content-encoding": "gzip" });
    const gzip = createGzip();
    gzip.pipe(res);
    gzip.write(delta("a"));
    gzip.flush(constants.Z_SYNC_FLUSH);
    void go.then(() => {
      restSent = true;
      gzip.end(`${delta("b")}data: [DONE]\n\n`);
    });
  });
  cleanups.push(() => {
    engine.server.closeAllConnections();
    engine.server.close();
  });
  return { address: engine.address, seen, restSent: () => restSent };
}

/** A promise resolved by `open()`, or after `ms` at the latest (so a failing test still ends). */
function gate(ms: number) {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => {
    open = resolve;
    setTimeout(resolve, ms);
  });
  return { opened, open };
}

describe("compressed answers", () => {
  test("a gzip SSE stream passes through as the engine flushes it, compressed as it came, the client's Accept-Encoding passed on", async () => {
    const firstRead = gate(3_000);
    const engine = await gzipStreamingEngine(firstRead.opened);
    const snooze = await startActivator({ holdBudget: 2_000 });
    cleanups.push(() => snooze.close());
    snooze.plane.readyAt("m", engine.address);
    const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
    const { data: stream, response } = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }], stream: true })
      .withResponse();
    expect(response.headers.get("content-encoding")).toBe("gzip");
    const contents: string[] = [];
    for await (const part of stream) {
      // The first event reaches the client before the engine sends the rest (before: nothing
      // came until the engine's stream ended).
      if (contents.length === 0) expect(engine.restSent()).toBe(false);
      contents.push(part.choices[0]!.delta.content ?? "");
      firstRead.open();
    }
    expect(contents).toEqual(["a", "b"]);
    expect(engine.seen[0]).toMatch(/gzip/);
  });

  test("a gzip SSE stream that breaks off is cut, not followed by an error event in plain text inside the compressed bytes", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        const gzip = createGzip();
        const parts: Buffer[] = [];
        gzip.on("data", (part: Buffer) => parts.push(part));
        gzip.write(delta("a"));
        gzip.flush(constants.Z_SYNC_FLUSH, () => {
          socket.write(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n",
          );
          const bytes = Buffer.concat(parts);
          socket.write(`${bytes.length.toString(16)}\r\n`);
          socket.write(bytes);
          socket.write("\r\n");
          setTimeout(() => socket.destroy(), 50);
        });
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await startActivator({ holdBudget: 2_000 });
    cleanups.push(() => snooze.close());
    snooze.plane.readyAt("m", engine.address);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept-encoding": "gzip" },
      body: chatBody({ stream: true }),
      signal: AbortSignal.timeout(10_000),
    });
    expect(response.status).toBe(200);
    // fetch decompresses: what came decodes to the engine's event, and the break shows as one.
    const reader = response.body!.getReader();
    let text = "";
    const ended = await (async () => {
      for (;;) {
        const { done, value } = await reader.read();
        if (done) return "whole";
        text += Buffer.from(value).toString();
      }
    })().catch((error: Error) => `cut: ${error.message}`);
    expect(text).toBe(delta("a"));
    expect(ended).toMatch(/^cut/);
  });

  test("into a stream hold progress opened, the engine is asked for identity, and its events come readable", async () => {
    const engine = await gzipStreamingEngine(Promise.resolve());
    const snooze = await startActivator({ holdBudget: 5_000, streamProgress: true });
    cleanups.push(() => snooze.close());
    const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
    const answer = client.chat.completions.create({
      model: "m",
      messages: [{ role: "user", content: "hi" }],
      stream: true,
    });
    // Progress opens the stream after a second held; the engine is ready a little later.
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    snooze.plane.readyAt("m", engine.address);
    const contents: string[] = [];
    for await (const part of await answer) contents.push(part.choices[0]!.delta.content ?? "");
    expect(contents).toEqual(["a", "b"]);
    expect(engine.seen).toEqual(["identity"]);
  });

  test("into a stream hold progress opened, an engine that compresses all the same: an error event that says so, then [DONE]", async () => {
    for (const contentType of ["text/event-stream", "application/json"]) {
      const engine = await rawEngine((socket) =>
        socket.once("data", () => {
          const body = gzipSync(
            contentType === "application/json" ? '{"object":"chat.completion"}' : delta("a"),
          );
          socket.write(
            `HTTP/1.1 200 OK\r\ncontent-type: ${contentType}\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n`,
          );
          socket.write(`${body.length.toString(16)}\r\n`);
          socket.write(body);
          socket.write(`\r\n${chunk("")}`);
        }),
      );
      cleanups.push(() => engine.close());
      const snooze = await startActivator({ holdBudget: 5_000, streamProgress: true });
      cleanups.push(() => snooze.close());
      const answer = fetch(`${snooze.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json", "accept-encoding": "gzip" },
        body: chatBody({ stream: true }),
        signal: AbortSignal.timeout(10_000),
      });
      await new Promise((resolve) => setTimeout(resolve, 1_300));
      snooze.plane.readyAt("m", engine.address);
      const response = await answer;
      const events = (await response.text()).split("\n\n").filter(Boolean);
      expect(events[0]).toMatch(/^: /);
      const error = JSON.parse(events.at(-2)!.slice("data: ".length)).error;
      expect(error.code).toBe("upstream_error");
      expect(error.message).toMatch(/Content-Encoding: gzip/);
      expect(events.at(-1)).toBe("data: [DONE]");
    }
  });
});

describe("a new response's answer, whose id Snooze reads for its retrieve", () => {
  test("the engine is asked for identity, so the id is learned and the retrieve reaches it (before: compressed, the id went unread and the retrieve was a 404)", async () => {
    const made = { id: "resp_abc123", object: "response", status: "completed", output: [] };
    const asked: (string | undefined)[] = [];
    const engine = await httpEngine((req, res) => {
      req.resume();
      asked.push(req.headers["accept-encoding"]);
      const body = JSON.stringify(made);
      if (/gzip/.test(String(req.headers["accept-encoding"]))) {
        res.writeHead(200, { "content-type": "application/json", "content-encoding": "gzip" });
        res.end(gzipSync(body));
      } else {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(body);
      }
    });
    cleanups.push(() => engine.server.close());
    const snooze = await startActivator({ holdBudget: 2_000 });
    cleanups.push(() => snooze.close());
    snooze.plane.readyAt("m", engine.address);
    // OpenAI's Node client sends Accept-Encoding: gzip (its fetch does).
    const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
    const created = await client.responses.create({ model: "m", input: "hi" });
    expect(created.id).toBe(made.id);
    const retrieved = await client.responses.retrieve(made.id);
    expect(retrieved.id).toBe(made.id);
    expect(asked).toHaveLength(2);
    expect(asked[0]).toBe("identity");
  });
});
