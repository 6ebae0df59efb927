import http2 from "node:http2";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`
maxBodySize: 64Ki
models:
  qwen:
    aliases: [qwen3]
    command: ${simCommand(["--enable-sleep-mode"])}
  llama:
    command: ${simCommand()}
`);
});
afterAll(() => snooze.close(1_000));

const post = (path: string, init: RequestInit) => fetch(`${snooze.url}${path}`, { method: "POST", ...init });

describe("requests the activator answers itself", () => {
  test("GET /v1/models lists every configured model with its tier", async () => {
    const body = (await (await fetch(`${snooze.url}/v1/models`)).json()) as any;
    expect(body.object).toBe("list");
    expect(body.data.map((m: { id: string }) => m.id)).toEqual(["qwen", "llama"]);
    expect(body.data[0]).toMatchObject({
      object: "model",
      owned_by: "snooze",
      snooze: { tier: "cold", aliases: ["qwen3"] },
    });
  });

  test("a model no event spoke of yet is cold since Snooze began, not a rounded-down second before", async () => {
    // Found by an outside tester: the page said "cold for 10s" of a Snooze that had run 8.6 s.
    const { models } = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as any;
    const { startedAt } = (await (await fetch(`${snooze.url}/snooze/v1/timeline`)).json()) as any;
    const llama = models.find((m: { id: string }) => m.id === "llama");
    expect(llama.tier).toBe("cold");
    expect(Date.parse(llama.since)).toBeGreaterThanOrEqual(Date.parse(startedAt));
  });

  test("an unknown model is a 404 naming the known ones", async () => {
    const response = await post("/v1/chat/completions", chat("gpt-9"));
    expect(response.status).toBe(404);
    const { error } = (await response.json()) as any;
    expect(error).toMatchObject({ type: "invalid_request_error", code: "model_not_found", param: "model" });
    expect(error.message).toContain("Known models: `qwen`, `llama`.");
    // The admin API's and /v1/models/<id>'s answers name them too (found by an outside tester).
    for (const [path, method] of [
      ["/v1/models/gpt-9", "GET"],
      ["/snooze/v1/models/gpt-9/wake", "POST"],
      ["/snooze/v1/models/gpt-9/logs", "GET"],
    ]) {
      const refused = await fetch(`${snooze.url}${path}`, { method });
      expect([path, refused.status]).toEqual([path, 404]);
      expect(((await refused.json()) as any).error.message).toBe(
        "The model `gpt-9` does not exist. Known models: `qwen`, `llama`.",
      );
    }
    // Counted under an empty model label, which no model id can be (found by an outside tester:
    // it was "unknown", a model's id as good as any).
    const metrics = await (await fetch(`${snooze.url}/metrics`)).text();
    expect(metrics).toMatch(/^snooze_requests_total\{model="",code="404"\} [1-9]/m);
  });

  test("bad JSON and a missing model are 400s", async () => {
    const bad = await post("/v1/chat/completions", {
      headers: { "content-type": "application/json" },
      body: "{nope",
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.code).toBe("invalid_json");
    const missing = await post("/v1/chat/completions", {
      headers: { "content-type": "application/json" },
      body: "{}",
    });
    expect(missing.status).toBe(400);
    expect(((await missing.json()) as any).error).toMatchObject({ code: "missing_model", param: "model" });
    const wrongType = await post("/v1/chat/completions", {
      headers: { "content-type": "application/json" },
      body: '{"model":5}',
    });
    expect(wrongType.status).toBe(400);
  });

  test("NaN and Infinity, which Python's json.dumps writes and vLLM's parser takes, are routed and sent on as written (found by an outside tester: 400 invalid_json)", async () => {
    const body =
      '{"model":"qwen3","messages":[{"role":"user","content":"NaN"}],"max_tokens":2,"temperature":NaN,"top_p":Infinity,"presence_penalty":-Infinity}';
    const response = await post("/v1/chat/completions", {
      headers: { "content-type": "application/json" },
      body,
    });
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).model).toBe("qwen");
  });

  test("a model name with a malformed percent-escape is a 400 that names it, on every route that takes one", async () => {
    const answers = await Promise.all([
      fetch(`${snooze.url}/v1/models/qw%ZZen`),
      fetch(`${snooze.url}/snooze/v1/models/qw%ZZen/logs`),
      post("/snooze/v1/models/qw%E0%A4%A/wake", {}),
    ]);
    for (const answer of answers) {
      expect(answer.status).toBe(400);
      expect(((await answer.json()) as any).error).toMatchObject({
        type: "invalid_request_error",
        code: "invalid_path",
      });
    }
  });

  test("a compressed body is a 415 that says to send it uncompressed, and starts no engine", async () => {
    const response = await post("/v1/chat/completions", {
      headers: { "content-type": "application/json", "content-encoding": "gzip" },
      body: gzipSync(JSON.stringify({ model: "llama", messages: [{ role: "user", content: "hi" }] })),
    });
    expect(response.status).toBe(415);
    const { error } = (await response.json()) as any;
    expect(error).toMatchObject({
      type: "invalid_request_error",
      code: "unsupported_content_encoding",
      param: "content-encoding",
    });
    expect(error.message).toContain("Content-Encoding: gzip");
    expect(error.message).toContain("uncompressed");
    const models = (await (await fetch(`${snooze.url}/v1/models`)).json()) as any;
    expect(models.data.find((m: { id: string }) => m.id === "llama").snooze.tier).toBe("cold");
    // `identity` is no encoding at all.
    const plain = await post("/v1/chat/completions", {
      headers: { "content-type": "application/json", "content-encoding": "identity" },
      body: "{nope",
    });
    expect(((await plain.json()) as any).error.code).toBe("invalid_json");
  });

  test("a body over the limit is a 413", async () => {
    const response = await post("/v1/completions", {
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "qwen", prompt: "x".repeat(70_000) }),
    });
    expect(response.status).toBe(413);
    expect(((await response.json()) as any).error.code).toBe("request_too_large");
  });

  test("the snooze-model header and the Host name route too", async () => {
    const byHeader = await post("/v1/completions", {
      headers: { "content-type": "application/json", "snooze-model": "qwen3" },
      body: JSON.stringify({ prompt: "hi", max_tokens: 2 }),
    });
    expect(byHeader.status).toBe(200);
    // fetch() cannot set Host; the unit tests of resolveModel cover it.
  });

  test("an alias in the body is rewritten to the id the engine serves", async () => {
    const response = await post("/v1/chat/completions", chat("qwen3"));
    expect(response.status).toBe(200);
    expect(((await response.json()) as any).model).toBe("qwen");
  });

  test("admin API: state, then sleep and wake on request", async () => {
    await (await post("/v1/chat/completions", chat("qwen"))).arrayBuffer();
    const state = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as any;
    const qwen = state.models.find((m: { id: string }) => m.id === "qwen");
    expect(qwen).toMatchObject({ tier: "ready", held: 0, inFlight: 0 });
    expect(qwen.lastStartMs).toBeGreaterThan(0);
    expect((await post("/snooze/v1/models/qwen/sleep", {})).status).toBe(200);
    expect(snooze.autoscaler.controller("qwen")!.tier).toBe("asleep-1");
    expect((await post("/snooze/v1/models/qwen3/wake", {})).status).toBe(202); // aliases work too
    expect((await post("/snooze/v1/models/nope/wake", {})).status).toBe(404);
    // Logs: a line count that is not a positive whole number is refused, a large one read as 10000.
    const negative = await fetch(`${snooze.url}/snooze/v1/models/qwen/logs?lines=-1`);
    expect(negative.status).toBe(400);
    expect(((await negative.json()) as any).error).toMatchObject({
      code: "invalid_parameter",
      param: "lines",
    });
    expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/logs?lines=50000`)).status).toBe(200);
    // So is an `after` that is not a count (found by an outside tester: read as "from the start").
    for (const after of ["abc", "-5", "qwen-1:x", "3&after=abc", "abc&after=3"]) {
      const refused = await fetch(`${snooze.url}/snooze/v1/models/qwen/logs?after=${after}`);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as any).error).toMatchObject({
        code: "invalid_parameter",
        param: "after",
      });
    }
    for (const after of ["3", "qwen-1:3,qwen-2:0"])
      expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/logs?after=${after}`)).status).toBe(200);
    // A count given twice, and an event stream's `after` that is not an entry's number, are refused
    // too (found by an outside tester: the first taken, and everything replayed).
    const twice = await fetch(`${snooze.url}/snooze/v1/models/qwen/logs?lines=1&lines=2`);
    expect([twice.status, ((await twice.json()) as any).error.param]).toEqual([400, "lines"]);
    for (const after of ["garbage", "-5", "1.5", "3&after=4"]) {
      const refused = await fetch(`${snooze.url}/snooze/v1/events/stream?after=${after}`);
      expect([after, refused.status]).toEqual([after, 400]);
      expect(((await refused.json()) as any).error).toMatchObject({
        code: "invalid_parameter",
        param: "after",
      });
    }
    // HEAD is answered as GET is, without the body, where GET answers at once.
    for (const path of ["/snooze/v1/timeline", "/snooze/v1/models/qwen/logs", "/snooze/v1/models"]) {
      const head = await fetch(`${snooze.url}${path}`, { method: "HEAD" });
      expect([path, head.status, await head.text()]).toEqual([path, 200, ""]);
    }
    // Empty is taken as absent, as the logs route takes it (found by an outside tester: one refused
    // what the other took).
    for (const after of ["0", "7", "latest", ""]) {
      const stream = await fetch(`${snooze.url}/snooze/v1/events/stream?after=${after}`);
      expect([after, stream.status]).toEqual([after, 200]);
      await stream.body?.cancel();
    }
    // A route asked with another method says which it takes.
    const get = await fetch(`${snooze.url}/snooze/v1/models/qwen/wake`);
    expect(get.status).toBe(405);
    expect(get.headers.get("allow")).toBe("POST");
    expect(((await get.json()) as any).error.code).toBe("method_not_allowed");
    const removal = await fetch(`${snooze.url}/snooze/v1/models`, { method: "DELETE" });
    expect(removal.status).toBe(405);
    expect(removal.headers.get("allow")).toBe("GET, HEAD");
    // So do the events endpoint and the open routes (found by an outside tester: 404 and 200 before).
    for (const [path, method, allow] of [
      ["/snooze/v1/events", "GET", "POST"],
      ["/snooze/v1/events", "PUT", "POST"],
      ["/metrics", "POST", "GET, HEAD"],
      ["/healthz", "DELETE", "GET, HEAD"],
      ["/readyz", "PATCH", "GET, HEAD"],
      ["/", "POST", "GET, HEAD"],
      ["/ui", "PUT", "GET, HEAD"],
      ["/snooze/v1/timeline", "DELETE", "GET, HEAD"],
      ["/snooze/v1/events/stream", "POST", "GET"],
      ["/snooze/v1/models/qwen/logs", "POST", "GET, HEAD"],
    ]) {
      const wrong = await fetch(`${snooze.url}${path}`, { method });
      expect([path, method, wrong.status, wrong.headers.get("allow")]).toEqual([path, method, 405, allow]);
      expect(((await wrong.json()) as any).error.code).toBe("method_not_allowed");
    }
  });

  test("CloudEvents in: wake in structured mode, sleep in binary mode, bad types refused", async () => {
    const structured = await post("/snooze/v1/events", {
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({
        specversion: "1.0",
        id: "1",
        source: "/test",
        type: "dev.snooze.model.wake",
        subject: "llama",
      }),
    });
    expect(structured.status).toBe(202);
    await until(() => snooze.autoscaler.controller("llama")!.tier === "ready", 5_000, "llama ready");
    const binary = await post("/snooze/v1/events", {
      headers: {
        "ce-specversion": "1.0",
        "ce-id": "2",
        "ce-source": "/test",
        "ce-type": "dev.snooze.model.stop",
        "content-type": "application/json",
      },
      body: JSON.stringify({ model: "llama" }),
    });
    expect(binary.status).toBe(200);
    expect(snooze.autoscaler.controller("llama")!.tier).toBe("cold");
    const bad = await post("/snooze/v1/events", {
      headers: { "content-type": "application/cloudevents+json" },
      body: JSON.stringify({
        specversion: "1.0",
        id: "3",
        source: "/test",
        type: "com.example.other",
        subject: "llama",
      }),
    });
    expect(bad.status).toBe(400);
    expect(((await bad.json()) as any).error.message).toContain("dev.snooze.model.wake");
  });

  test("Expect: 100-continue: a path with no route is refused before the body; the events endpoint asks for it", async () => {
    const exchange = (head: string, body?: string) =>
      new Promise<string>((resolve, reject) => {
        const { hostname, port } = new URL(snooze.url);
        const socket = connect(Number(port), hostname, () => socket.write(head));
        let reply = "";
        socket.setEncoding("utf8");
        socket.on("data", (chunk: string) => {
          reply += chunk;
          if (
            body !== undefined &&
            reply.startsWith("HTTP/1.1 100 Continue\r\n\r\n") &&
            !reply.includes("HTTP/1.1 2")
          ) {
            socket.write(body);
            body = undefined;
          }
          if (/HTTP\/1\.1 [2-5]\d\d[\s\S]*\r\n\r\n/.test(reply)) setTimeout(() => socket.end(), 50);
        });
        socket.on("end", () => resolve(reply));
        socket.on("error", reject);
      });
    const refused = await exchange(
      `POST /sleep HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 1000000\r\nexpect: 100-continue\r\n\r\n`,
    );
    expect(refused).not.toContain("100 Continue");
    expect(refused.startsWith("HTTP/1.1 404")).toBe(true);
    expect(refused.toLowerCase()).toContain("connection: close");
    const event = JSON.stringify({
      specversion: "1.0",
      id: "c1",
      source: "/test",
      type: "dev.snooze.model.wake",
      subject: "llama",
    });
    const taken = await exchange(
      `POST /snooze/v1/events HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/cloudevents+json\r\ncontent-length: ${event.length}\r\nexpect: 100-continue\r\n\r\n`,
      event,
    );
    expect(taken).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 202/);
    // An event declaring more than the limit is refused before the body is asked for.
    const tooBig = await exchange(
      `POST /snooze/v1/events HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/cloudevents+json\r\ncontent-length: 1000000\r\nexpect: 100-continue\r\n\r\n`,
    );
    expect(tooBig).not.toContain("100 Continue");
    expect(tooBig.startsWith("HTTP/1.1 413")).toBe(true);
    // So is a message whose headers say it is no CloudEvent (no ce-*, not a CloudEvents type).
    const notAnEvent = await exchange(
      `POST /snooze/v1/events HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: 20\r\nexpect: 100-continue\r\n\r\n`,
    );
    expect(notAnEvent).not.toContain("100 Continue");
    expect(notAnEvent).toMatch(/^HTTP\/1\.1 400[\s\S]*not_a_cloudevent/);
    // And one in an event format Snooze does not read (found by an outside tester).
    const xml = await exchange(
      `POST /snooze/v1/events HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/cloudevents+xml\r\ncontent-length: 20\r\nexpect: 100-continue\r\n\r\n`,
    );
    expect(xml).not.toContain("100 Continue");
    expect(xml).toMatch(/^HTTP\/1\.1 415[\s\S]*unsupported_media_type/);
  });

  /**
   * Writes `bytes` on a new connection and reads the reply until the server closes it; with
   * `piece`, in writes of that many bytes, each after the last was sent.
   */
  const rawReply = (bytes: string, piece = bytes.length) =>
    new Promise<string>((resolve, reject) => {
      const { hostname, port } = new URL(snooze.url);
      const send = async () => {
        for (let at = 0; at < bytes.length && !socket.destroyed; at += piece)
          await new Promise((sent) => socket.write(bytes.slice(at, at + piece), sent));
      };
      const socket = connect(Number(port), hostname, () => void send());
      let text = "";
      socket.setEncoding("utf8");
      socket.on("data", (chunk: string) => (text += chunk));
      socket.on("end", () => resolve(text));
      socket.on("error", reject);
    });
  const errorOf = (reply: string) => JSON.parse(reply.slice(reply.indexOf("\r\n\r\n") + 4)).error;

  test("an absolute-form target (RFC 9112) is served as its path, its authority taken as the Host", async () => {
    // Found by an outside tester: answered 404 before. One request per connection, read to its end.
    const ask = (head: string, body = "") => rawReply(head + body);
    const { host } = new URL(snooze.url);
    const body = JSON.stringify({ model: "llama", messages: [{ role: "user", content: "hi" }] });
    const served = await ask(
      `POST http://${host}/v1/chat/completions HTTP/1.1\r\nhost: ignored.example\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`,
      body,
    );
    expect(served).toMatch(/^HTTP\/1\.1 200/);
    expect(served).toContain('"model":"llama"');
    // The engine's private API stays out of reach, dot segments and all.
    const sleep = await ask(
      `POST http://${host}/v1/../sleep?level=1 HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`,
    );
    expect(sleep).toMatch(/^HTTP\/1\.1 404/);
    // The admin API's loopback check reads the target's authority, not the Host header.
    const admin = await ask(
      `GET http://rebound.example/snooze/v1/models HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`,
    );
    expect(admin).toMatch(/^HTTP\/1\.1 403/);
    const unreadable = await ask(`GET http://[::1 HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`);
    expect(unreadable).toMatch(/^HTTP\/1\.1 400/);
    expect(errorOf(unreadable)).toMatchObject({
      type: "invalid_request_error",
      code: "invalid_request_target",
    });
    const credentials = await ask(
      `GET http://user:pw@${host}/v1/models HTTP/1.1\r\nhost: ${host}\r\nconnection: close\r\n\r\n`,
    );
    expect(credentials).toMatch(/^HTTP\/1\.1 400/);
    expect(errorOf(credentials).message).toContain("credentials");
    // Another scheme is no URL of this server: a 400 that says so (found by an outside tester: 404).
    const ftp = await ask(
      `POST ftp://${host}/v1/chat/completions HTTP/1.1\r\nhost: ${host}\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n`,
      body,
    );
    expect(ftp).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorOf(ftp)).toMatchObject({ type: "invalid_request_error", code: "invalid_request_target" });
    expect(errorOf(ftp).message).toBe(
      "The request target is an absolute URL with the scheme `ftp`: Snooze serves http and https URLs only. Send the path (e.g. /v1/chat/completions).",
    );
  });

  test("`OPTIONS *` says what the server takes; `*` with another method is a 400 (found by an outside tester)", async () => {
    // Before: `404 No route for OPTIONS *`, and for `GET *`.
    const asterisk = await rawReply("OPTIONS * HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n");
    expect(asterisk).toMatch(/^HTTP\/1\.1 204 /);
    expect(asterisk).toMatch(/\r\nallow: GET, HEAD, POST, OPTIONS\r\n/i);
    for (const [line, said] of [
      ["GET *", "The request target is `*` (the asterisk form), which only OPTIONS takes."],
    ]) {
      const reply = await rawReply(`${line} HTTP/1.1\r\nhost: localhost\r\nconnection: close\r\n\r\n`);
      expect([line, reply.slice(0, 12)]).toEqual([line, "HTTP/1.1 400"]);
      expect(errorOf(reply)).toMatchObject({ code: "invalid_request_target" });
      expect(errorOf(reply).message).toBe(`${said} Send the path (e.g. /v1/chat/completions).`);
    }
  });

  test("an Expect other than 100-continue is a 417, and a transfer coding besides chunked a 501, both as OpenAI errors", async () => {
    // Found by an outside tester: the 417 was Node's own, with an empty body; `gzip, chunked` was read
    // as a body still compressed.
    const body = JSON.stringify({ model: "llama", messages: [{ role: "user", content: "hi" }] });
    const expectation = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nexpect: 200-ok\r\nconnection: close\r\n\r\n${body}`,
    );
    expect(expectation).toMatch(/^HTTP\/1\.1 417 /);
    expect(errorOf(expectation)).toMatchObject({ type: "invalid_request_error", code: "expectation_failed" });
    expect(errorOf(expectation).message).toContain("200-ok");
    // ...also beside 100-continue, which Node alone would have answered with 100 (found by an
    // outside tester); and no body is asked for.
    const mixed = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nexpect: 100-continue, foo\r\n\r\n`,
    );
    expect(mixed).toMatch(/^HTTP\/1\.1 417 /);
    expect(errorOf(mixed).message).toContain("100-continue, foo");
    const gzipped = gzipSync(body);
    const coded = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: gzip, chunked\r\n\r\n${gzipped.length.toString(16)}\r\n${gzipped.toString("latin1")}\r\n0\r\n\r\n`,
    );
    expect(coded).toMatch(/^HTTP\/1\.1 501 /);
    expect(errorOf(coded)).toMatchObject({ code: "unsupported_transfer_encoding" });
    expect(errorOf(coded).message).toBe(
      "The request body is sent with Transfer-Encoding: gzip, chunked; Snooze decodes only the chunked transfer coding, not gzip. Send the body uncompressed, with Transfer-Encoding: chunked alone or with Content-Length.",
    );
  });

  test("Transfer-Encoding: identity is told for what it is, not as compression (found by an outside tester)", async () => {
    // RFC 2616's `identity` is no transfer coding of HTTP/1.1 since RFC 7230; the answer was a 501
    // "Send it uncompressed", for a body that was not compressed.
    const body = JSON.stringify({ model: "llama", messages: [{ role: "user", content: "hi" }] });
    // Alone, chunked is not the final coding: the body's length cannot be read (RFC 9112 §6.3: 400,
    // and the connection closed; Node's parser refuses it too, on any other route).
    const alone = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: identity\r\n\r\n${body}`,
    );
    expect(alone).toMatch(/^HTTP\/1\.1 400 /);
    expect(alone).toMatch(/\r\nconnection: close\r\n/i);
    expect(errorOf(alone)).toMatchObject({ type: "invalid_request_error", code: "malformed_request" });
    expect(errorOf(alone).message).toBe(
      "The request is not well-formed HTTP/1.1: its Transfer-Encoding (identity) does not end with chunked, so the body's length cannot be read (RFC 9112 §6.3); and identity is not a transfer coding HTTP/1.1 defines (RFC 2616's, removed since). Send the body with Content-Length, or with Transfer-Encoding: chunked alone.",
    );
    // Before chunked: a coding not understood, 501 (RFC 9112 §6.1).
    const before = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ntransfer-encoding: Identity, chunked\r\n\r\n${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );
    expect(before).toMatch(/^HTTP\/1\.1 501 /);
    expect(errorOf(before)).toMatchObject({
      type: "invalid_request_error",
      code: "unsupported_transfer_encoding",
    });
    expect(errorOf(before).message).toBe(
      "The request body is sent with Transfer-Encoding: identity, chunked; identity is not a transfer coding HTTP/1.1 defines (RFC 2616's, removed since), and Snooze decodes only chunked. Send the body with Transfer-Encoding: chunked alone, or with Content-Length.",
    );
  });

  test("CONNECT (a client taking Snooze for a forward proxy) is answered 405, not dropped", async () => {
    const reply = await rawReply(
      "CONNECT example.com:443 HTTP/1.1\r\nhost: example.com:443\r\nx-request-id: tunnel-1\r\n\r\n",
    );
    expect(reply.startsWith("HTTP/1.1 405")).toBe(true);
    expect(reply).toMatch(/\r\nx-request-id: tunnel-1\r\n/);
    expect(errorOf(reply)).toMatchObject({ code: "method_not_allowed", type: "invalid_request_error" });
  });

  test("what Node's parser refuses is answered as an OpenAI error too, not a bare status line", async () => {
    // Found by an outside tester: a ce-* header past the 16 KiB limit got Node's bare 431.
    const big = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-request-id: big-1\r\nx-big: ${"a".repeat(20_000)}\r\n\r\n`,
    );
    expect(big).toMatch(/^HTTP\/1\.1 431 /);
    // Named by the caller's own id, found among the bytes read, as every other refusal is.
    expect(big).toMatch(/\r\nx-request-id: big-1\r\n/);
    expect(errorOf(big)).toMatchObject({ code: "request_headers_too_large", type: "invalid_request_error" });
    // So are more than 1,000 header fields, however small: the message names that limit too (found
    // by an outside tester: 5 KB of headers were told they passed 16 KiB).
    const many = await rawReply(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\n${"a: b\r\n".repeat(1_000)}\r\n`,
    );
    expect(many).toMatch(/^HTTP\/1\.1 431 /);
    expect(errorOf(many).message).toContain("at most 1000 header fields");
    // A URL past the limit is told it is the URL, whole or arriving in pieces (found by an outside
    // tester: a 20 KB query string was told to send fewer headers).
    const longTarget = `POST /v1/chat/completions?q=${"a".repeat(20_000)} HTTP/1.1\r\nhost: x\r\n\r\n`;
    for (const reply of [await rawReply(longTarget), await rawReply(longTarget, 7_000)]) {
      expect(reply).toMatch(/^HTTP\/1\.1 414 /);
      expect(errorOf(reply)).toMatchObject({ code: "uri_too_long", type: "invalid_request_error" });
    }
    const garbage = await rawReply("NOT HTTP AT ALL\r\n\r\n");
    expect(garbage).toMatch(/^HTTP\/1\.1 400 /);
    // No id of the caller's: a fresh one, in vLLM's form.
    expect(garbage).toMatch(/\r\nx-request-id: [0-9a-f]{32}\r\n/);
    expect(errorOf(garbage).code).toBe("malformed_request");
    const smuggled = await rawReply(
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 1\r\ntransfer-encoding: chunked\r\n\r\n0\r\n\r\n",
    );
    expect(errorOf(smuggled).code).toBe("malformed_request");
    // The message says what was wrong, in the parser's words (found by an outside tester: every
    // refusal read "not well-formed", leaving the client to guess which of its bytes).
    expect(errorOf(smuggled).message).toBe(
      "The request is not well-formed HTTP/1.1: Transfer-Encoding can't be present with Content-Length.",
    );
    const twoLengths = await rawReply(
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-length: 2\r\ncontent-length: 2\r\n\r\n{}",
    );
    expect(errorOf(twoLengths).message).toContain(": Duplicate Content-Length.");
    const badChunk = await rawReply(
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
    );
    expect(errorOf(badChunk).message).toContain(": Invalid character in chunk size.");
    const hostless = await rawReply("GET /healthz HTTP/1.1\r\n\r\n");
    expect(hostless).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorOf(hostless).code).toBe("missing_host");
    // Two Hosts are two stories (found by an outside tester: it answered 200).
    const twoHosts = await rawReply("GET /healthz HTTP/1.1\r\nhost: a\r\nhost: b\r\n\r\n");
    expect(twoHosts).toMatch(/^HTTP\/1\.1 400 /);
    expect(errorOf(twoHosts).code).toBe("duplicate_host");
    // HTTP/1.0 has no Host to require.
    expect(await rawReply("GET /healthz HTTP/1.0\r\n\r\n")).toMatch(/^HTTP\/1\.1 200 /);
    // A request line claiming HTTP/2.0, which Node's parser lets through, is not routed as HTTP/1.1
    // (found by an outside tester: it was answered, a model resolved and all).
    const two = await rawReply(
      'POST /v1/chat/completions HTTP/2.0\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 16\r\n\r\n{"model":"qwen"}',
    );
    expect(two).toMatch(/^HTTP\/1\.1 505 /);
    expect(errorOf(two)).toMatchObject({ code: "http_version_not_supported", type: "invalid_request_error" });
  });

  test("an HTTP/2 client with prior knowledge is told in HTTP/2 to use HTTP/1.1, not sent HTTP/1.1 bytes", async () => {
    // Found by an outside tester: `curl --http2-prior-knowledge` said "Empty reply from server",
    // the 400 in HTTP/1.1 being no frame it could read.
    const session = http2.connect(snooze.url);
    const goaway = new Promise<[number, string]>((resolve) => {
      session.once("goaway", (code, _lastStream, data) => resolve([code, data?.toString() ?? ""]));
      session.once("close", () => resolve([-1, "closed without a GOAWAY"]));
    });
    session.on("error", () => {});
    const stream = session.request({ ":path": "/v1/models" });
    stream.on("error", () => {});
    stream.end();
    const [code, words] = await goaway;
    expect(code).toBe(http2.constants.NGHTTP2_HTTP_1_1_REQUIRED);
    expect(words).toContain("HTTP/1.1 only");
    session.destroy();
    // After HTTP/1.1 requests on a connection the preface is an HTTP/1.1 client's bytes: they get
    // their answers, then an HTTP/1.1 error, not HTTP/2 frames.
    const late = await rawReply("GET /healthz HTTP/1.1\r\nhost: x\r\n\r\nPRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
    expect(late).toMatch(/^HTTP\/1\.1 200 [\s\S]*HTTP\/1\.1 400 /);
    expect(late).toContain("an HTTP/2 connection preface after HTTP/1.1 requests");
  });

  test("an HTTP/2 client that writes its request right after the preface reads the GOAWAY, not a reset", async () => {
    // Found by an outside tester: Python's httpx (`http2=True, http1=False`), under OpenAI's Python
    // SDK too, writes its HEADERS and DATA frames right after the preface without waiting for an
    // answer. Snooze closed the connection as soon as its GOAWAY was written, those frames unread
    // or still to come, so the kernel reset it: the client's next write failed with "Broken pipe",
    // and it never read the GOAWAY saying why (nine times in ten).
    const { hostname, port } = new URL(snooze.url);
    const preface = Buffer.concat([
      Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"),
      Buffer.from([0, 0, 0, 0x4, 0, 0, 0, 0, 0]), // empty SETTINGS
    ]);
    // A HEADERS frame on stream 1 (its block need not decode: Snooze reads no HTTP/2) and a DATA frame.
    const frame = (type: number, flags: number, payload: Buffer) =>
      Buffer.concat([Buffer.from([0, 0, payload.length, type, flags, 0, 0, 0, 1]), payload]);
    const request = Buffer.concat([
      frame(0x1, 0x4, Buffer.alloc(40, 0x82)),
      frame(0x0, 0x1, Buffer.alloc(200, 0x61)),
    ]);
    // Half-open allowed, as a Python socket is: the GOAWAY's FIN does not end the client's side.
    const socket = connect({ port: Number(port), host: hostname, allowHalfOpen: true });
    socket.write(preface);
    let received = Buffer.alloc(0);
    const errors: string[] = [];
    socket.on("error", (error: NodeJS.ErrnoException) => errors.push(error.code ?? error.message));
    socket.on("data", (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
    });
    await until(() => received.includes(Buffer.from("HTTP/1.1 only")));
    // The server has written its answer by now; the client's frames come after it, as httpx's do,
    // in two writes (its HEADERS, then its DATA): a reset connection fails the second.
    const pause = () => new Promise((resolve) => setTimeout(resolve, 100));
    await pause();
    for (const bytes of [request.subarray(0, 49), request.subarray(49)]) {
      socket.write(bytes, () => {});
      await pause();
    }
    expect(errors).toEqual([]);
    socket.destroy();
    // A client that never closes its side is not kept: the connection ends a moment later.
    const silent = connect(Number(port), hostname);
    silent.on("data", () => {});
    const closed = new Promise<number>((resolve) => {
      const at = Date.now();
      silent.on("close", () => resolve(Date.now() - at));
      silent.on("error", () => {});
    });
    silent.write(preface);
    expect(await closed).toBeLessThan(5_000);
  });

  test("/healthz, /readyz and /metrics", async () => {
    expect((await fetch(`${snooze.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${snooze.url}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${snooze.url}/metrics`)).text();
    expect(metrics).toContain("snooze_requests_total");
    expect(metrics).toContain("snooze_tier_transitions_total");
  });
});
