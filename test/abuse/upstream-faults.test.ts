import { once } from "node:events";
import { maxHeaderSize } from "node:http";
import { connect } from "node:net";
import { gzipSync } from "node:zlib";
import OpenAI from "openai";
import { afterEach, describe, expect, test } from "vitest";
import { metricValue, until } from "../helpers/local-snooze.ts";
import {
  blackholePort,
  chatBody,
  chunk,
  finalBody,
  finalStatus,
  httpEngine,
  rawEngine,
  rawRequest,
  startActivator,
  type TestActivator,
} from "./harness.ts";

/**
 * Every request ends, whatever the engine does: an answer, an OpenAI-shaped 502/503/504 with a
 * reason, or an SSE error event. Engines here are raw sockets that misbehave on purpose.
 */
const cleanups: (() => unknown)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

async function activatorFor(address: string, settings: Parameters<typeof startActivator>[0] = {}) {
  const snooze = await startActivator({ holdBudget: 2_000, ...settings });
  cleanups.push(() => snooze.close());
  snooze.plane.readyAt("m", address);
  return snooze;
}

const post = (snooze: TestActivator, body = chatBody(), headers: Record<string, string> = {}) =>
  fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
    signal: AbortSignal.timeout(10_000),
  });

const errorOf = async (response: Response) => ((await response.json()) as any).error;

/** An engine that answers every request with this status and body. */
async function answeringEngine(status: number, contentType: string, body: string) {
  const engine = await httpEngine((req, res) => {
    req.resume();
    res.writeHead(status, { "content-type": contentType });
    res.end(body);
  });
  cleanups.push(() => engine.server.close());
  return engine;
}

/**
 * An engine that closes every connection once the request comes, without a byte of answer;
 * `seen` counts the requests sent to it (not the activator's `/health` probes).
 */
async function closingEngine() {
  let seen = 0;
  const engine = await rawEngine((socket) =>
    socket.once("data", (data) => {
      if (String(data).startsWith("POST ")) seen++;
      socket.destroy();
    }),
  );
  cleanups.push(() => engine.close());
  return { address: engine.address, seen: () => seen };
}

async function upstreamErrors(snooze: TestActivator, reason: string): Promise<number> {
  return metricValue(await snooze.registry.metrics(), "snooze_upstream_errors_total", { reason });
}

describe("the engine fails before any byte of an answer", () => {
  test("a malformed answer (not HTTP) → 502 upstream_error, not silence", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () => socket.end("NOT HTTP AT ALL\r\n\r\n")),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze);
    expect(response.status).toBe(502);
    const error = await errorOf(response);
    expect(error).toMatchObject({ type: "server_error", code: "upstream_error" });
    expect(error.message).toMatch(/\w/);
    expect(await upstreamErrors(snooze, "error")).toBe(1);
  });

  test("a status line with a code below 100 (`HTTP/1.1 000`) → 502 upstream_error that says the answer is not HTTP, not the HTTP client's assertion (found by an outside tester)", async () => {
    for (const code of ["000", "099"]) {
      const engine = await rawEngine((socket) =>
        socket.once("data", () => socket.end(`HTTP/1.1 ${code} Zero\r\ncontent-length: 2\r\n\r\n{}`)),
      );
      cleanups.push(() => engine.close());
      const snooze = await activatorFor(engine.address);
      const response = await post(snooze);
      expect(response.status).toBe(502);
      expect(await errorOf(response)).toMatchObject({
        code: "upstream_error",
        message: `The call to the engine failed: the engine's answer is not valid HTTP (its status ${code} is not within 100–599)`,
      });
    }
  });

  test("a status line with a code past 599 (`HTTP/1.1 799 Weird`) → 502 upstream_error that says the answer is not HTTP, not passed on (found by an outside tester)", async () => {
    for (const code of [600, 799, 999]) {
      const engine = await rawEngine((socket) =>
        socket.once("data", () => socket.end(`HTTP/1.1 ${code} Weird\r\ncontent-length: 2\r\n\r\n{}`)),
      );
      cleanups.push(() => engine.close());
      const snooze = await activatorFor(engine.address);
      const response = await post(snooze);
      expect(response.status).toBe(502);
      expect(await errorOf(response)).toMatchObject({
        type: "server_error",
        code: "upstream_error",
        message: `The call to the engine failed: the engine's answer is not valid HTTP (its status ${code} is not within 100–599)`,
      });
      expect(await upstreamErrors(snooze, "error")).toBe(1);
    }
  });

  test("a malformed head → 502 upstream_error naming what is wrong with it, not undici's misleading body-length words, and sent once", async () => {
    const heads: [string, string][] = [
      // undici reports any parse failure of a head after its Content-Length as a body-length
      // mismatch; its words were wrong for all but the first of these (found by an outside tester).
      ...[
        "content-length: 2\r\ncontent-length: 3",
        "content-length: 2\r\ncontent-length: 2",
        "content-length: 2\r\nx-del: a\x7fb",
        "content-length: 2\r\nx-control: a\x01b",
        "content-length: 2\r\nx-folded: a\r\n  b",
      ].map((lines): [string, string] => [
        `HTTP/1.1 200 OK\r\n${lines}\r\n\r\n{}`,
        "its head is malformed after its Content-Length: a second Content-Length, a control character in a header, or a header line folded onto the next, say",
      ]),
      ["HTTP/1.1 200 OK\r\nno colon here\r\n\r\n{}", "Invalid header token"],
      ["HTTP/1.1 200 OK\r\ncontent-length: abc\r\n\r\n{}", "Invalid character in Content-Length"],
      // An engine that switches protocols unasked answered: it is not a dying engine, and the
      // request is not sent again (before: taken for a connection that broke, resent, then `upstream_died`).
      [
        "HTTP/1.1 101 Switching Protocols\r\nupgrade: x\r\nconnection: upgrade\r\n\r\n",
        "it switched protocols (101) though the request asked for no upgrade",
      ],
    ];
    for (const [head, why] of heads) {
      let seen = 0;
      const engine = await rawEngine((socket) =>
        socket.once("data", () => {
          seen++;
          socket.end(head);
        }),
      );
      cleanups.push(() => engine.close());
      const snooze = await activatorFor(engine.address);
      const response = await post(snooze);
      expect(response.status).toBe(502);
      expect(await errorOf(response)).toMatchObject({
        code: "upstream_error",
        message: `The call to the engine failed: the engine's answer is not valid HTTP (${why})`,
      });
      expect(seen).toBe(1);
    }
  });

  test("an answer with a transfer coding besides chunked (`gzip, chunked`, which the engine may not send unasked) → 502 upstream_error naming it, not its compressed bytes as the 200's body (found by an outside tester)", async () => {
    const json = gzipSync('{"ok":true}');
    let seen = 0;
    const engine = await rawEngine((socket) =>
      socket.on("data", () => {
        seen++;
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: gzip, chunked\r\n\r\n${json.length.toString(16)}\r\n`,
        );
        socket.write(json);
        socket.write("\r\n0\r\n\r\n");
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze);
    expect(response.status).toBe(502);
    expect(await errorOf(response)).toMatchObject({
      code: "upstream_error",
      message:
        "The call to the engine failed: the engine's answer is sent with Transfer-Encoding: gzip, chunked, and Snooze decodes only chunked (RFC 9112 §6.1: no other transfer coding is sent to a request without TE)",
    });
    expect(seen).toBe(1);
  });

  test('a head larger than undici reads → 502 upstream_error that says so, not undici\'s "Headers Overflow Error", and sent once', async () => {
    let seen = 0;
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        seen++;
        socket.end(`HTTP/1.1 200 OK\r\nx-big: ${"a".repeat(maxHeaderSize)}\r\ncontent-length: 2\r\n\r\n{}`);
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze);
    expect(response.status).toBe(502);
    expect(await errorOf(response)).toMatchObject({
      code: "upstream_error",
      message: `The call to the engine failed: the engine's answer has a head larger than the ${maxHeaderSize} bytes Snooze reads of one`,
    });
    expect(seen).toBe(1);
  });

  test("a status past 599 into a stream hold progress opened: an SSE error event, then [DONE]", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () =>
        socket.end("HTTP/1.1 799 Weird\r\ncontent-type: text/event-stream\r\ncontent-length: 2\r\n\r\n{}"),
      ),
    );
    cleanups.push(() => engine.close());
    const events = await eventsAfterProgress(engine.address);
    expect(events[0]).toMatch(/^: /);
    expect(JSON.parse(events.at(-2)!.slice("data: ".length)).error).toMatchObject({
      code: "upstream_error",
      message:
        "The call to the engine failed: the engine's answer is not valid HTTP (its status 799 is not within 100–599)",
    });
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  test("an engine that takes the request and never answers → 504 upstream_timeout after firstByteTimeout", async () => {
    const engine = await rawEngine((socket) => socket.resume());
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address, { firstByteTimeout: 300 });
    const started = performance.now();
    const response = await post(snooze);
    const took = performance.now() - started;
    expect(response.status).toBe(504);
    expect(await errorOf(response)).toMatchObject({ code: "upstream_timeout" });
    // The engine may still be generating it: OpenAI's clients, which retry a 504 on their own,
    // would repeat the generation (found by an outside tester).
    expect(response.headers.get("x-should-retry")).toBe("false");
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(3_000);
    expect(await upstreamErrors(snooze, "first-byte-timeout")).toBe(1);
    // The engine's connection is let go: it does not pile up.
    await until(() => engine.connections.size === 0, 2_000, "the timed-out connection to close");
  });

  test("an engine that closes every connection once it has the request → sent again once, then 502 upstream_died", async () => {
    const engine = await closingEngine();
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze);
    expect(response.status).toBe(502);
    const error = await errorOf(response);
    expect(error).toMatchObject({ type: "server_error", code: "upstream_died" });
    // No exit is known here (no control plane says one): the message says what the activator saw.
    expect(error.message).toMatch(
      /failed under this request before answering \(its connection closed: other side closed\)\. .*not sent again/,
    );
    expect(await upstreamErrors(snooze, "unreachable")).toBe(2);
    expect(
      metricValue(await snooze.registry.metrics(), "snooze_resent_requests_total", { reason: "unreachable" }),
    ).toBe(1);
    // The engine is being replaced: a client is told when to come back (found by an outside tester).
    expect(Number(response.headers.get("retry-after"))).toBeGreaterThanOrEqual(1);
    expect(engine.seen()).toBe(2);
    expect(snooze.plane.demands.filter((d) => d.hint?.unreachable)).toHaveLength(1);
  });

  test("nothing listens (refused) → sent again once, then 502 upstream_unreachable at once: the request never reached an engine", async () => {
    const closed = await httpEngine(() => {});
    await new Promise((resolve) => closed.server.close(resolve));
    const snooze = await activatorFor(closed.address);
    const started = performance.now();
    const response = await post(snooze);
    expect(response.status).toBe(502);
    const error = await errorOf(response);
    expect(error).toMatchObject({ code: "upstream_unreachable" });
    expect(error.message).toMatch(/could not be reached: .*ECONNREFUSED/);
    // Not waited for an exit: no engine had the request.
    expect(performance.now() - started).toBeLessThan(900);
    expect(await upstreamErrors(snooze, "unreachable")).toBe(2);
  });

  test("connecting hangs (accept queue full) → 504 upstream_connect_timeout after connectTimeout, twice", async () => {
    const hole = await blackholePort();
    cleanups.push(() => hole.close());
    const snooze = await activatorFor(hole.address, { connectTimeout: 300 });
    const started = performance.now();
    const response = await post(snooze);
    const took = performance.now() - started;
    expect(response.status).toBe(504);
    expect(await errorOf(response)).toMatchObject({ code: "upstream_connect_timeout" });
    // No engine had the request: retrying it repeats no work.
    expect(response.headers.get("x-should-retry")).toBeNull();
    expect(took).toBeGreaterThanOrEqual(550);
    expect(took).toBeLessThan(5_000);
    expect(await upstreamErrors(snooze, "connect-timeout")).toBe(2);
  });
});

describe("interim answers", () => {
  test("103 Early Hints, then the answer: the client gets the answer, not the 103", async () => {
    const answer = JSON.stringify({ object: "chat.completion", choices: [] });
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        socket.write("HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n");
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${answer.length}\r\n\r\n${answer}`,
        );
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe(answer);
  });

  test("100 Continue the activator never asked for, then the answer: the client gets the answer, sent once (found by an outside tester)", async () => {
    // RFC 9110 §15.2: a client must parse 1xx answers it did not expect. undici destroys the
    // connection on a 100 ("bad response"): before, the request was sent again and ended in a 502.
    const answer = JSON.stringify({ object: "chat.completion", choices: [] });
    let seen = 0;
    const engine = await rawEngine((socket) =>
      socket.on("data", (data) => {
        if (!String(data).startsWith("POST ")) return;
        seen++;
        socket.write("HTTP/1.1 100 Continue\r\nx-interim: yes\r\n\r\n");
        // ...twice, the second in the same packet as the answer: each is dropped.
        socket.write(
          `HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${answer.length}\r\n\r\n${answer}`,
        );
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    for (let i = 0; i < 2; i++) {
      const response = await post(snooze);
      expect(response.status).toBe(200);
      expect(response.headers.get("x-interim")).toBeNull();
      expect(await response.text()).toBe(answer);
    }
    expect(seen).toBe(2);
  });
});

describe("interim answers do not stop the clock (found by an outside tester: an engine sending 103 or 102 Processing every few milliseconds held the request past firstByteTimeout, for as long as it kept on)", () => {
  /** An engine that sends `interim` every 20 ms and never a final answer. */
  async function interimEngine(interim: string) {
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        const timer = setInterval(() => socket.write(interim), 20);
        socket.once("close", () => clearInterval(timer));
      }),
    );
    cleanups.push(() => engine.close());
    return engine;
  }

  for (const interim of [
    "HTTP/1.1 103 Early Hints\r\nlink: </style.css>; rel=preload\r\n\r\n",
    "HTTP/1.1 102 Processing\r\n\r\n",
  ]) {
    test(`${interim.slice(9, 12)} over and over, never an answer → 504 upstream_timeout at firstByteTimeout, the engine's connection closed`, async () => {
      const engine = await interimEngine(interim);
      const snooze = await activatorFor(engine.address, { firstByteTimeout: 400 });
      const response = await post(snooze);
      expect(response.status).toBe(504);
      expect(response.headers.get("x-should-retry")).toBe("false");
      expect((await errorOf(response)).code).toBe("upstream_timeout");
      await until(() => engine.connections.size === 0, 2_000, "the engine's connection to close");
      expect(await upstreamErrors(snooze, "first-byte-timeout")).toBe(1);
      expect(metricValue(await snooze.registry.metrics(), "snooze_in_flight_requests", { model: "m" })).toBe(
        0,
      );
    });
  }

  test("into a stream hold progress opened: the upstream_timeout error event, then [DONE]", async () => {
    const engine = await interimEngine("HTTP/1.1 103 Early Hints\r\n\r\n");
    const events = await eventsAfterProgress(engine.address, { firstByteTimeout: 400 });
    expect(events[0]).toMatch(/^: /);
    expect(JSON.parse(events.at(-2)!.slice("data: ".length)).error).toMatchObject({
      code: "upstream_timeout",
    });
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  test("interim answers, then the answer within firstByteTimeout: the answer", async () => {
    const answer = JSON.stringify({ object: "chat.completion", choices: [] });
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        socket.write("HTTP/1.1 102 Processing\r\n\r\n");
        socket.write("HTTP/1.1 103 Early Hints\r\n\r\n");
        socket.write(
          `HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: ${answer.length}\r\n\r\n${answer}`,
        );
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address, { firstByteTimeout: 5_000 });
    const response = await post(snooze);
    expect(response.status).toBe(200);
    expect(await response.text()).toBe(answer);
  });
});

describe("the engine stops in the middle of an answer", () => {
  test("an SSE stream that goes quiet ends with an SSE error event after idleTimeout", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () =>
        socket.write(
          "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
            chunk('data: {"a":1}\n\n'),
        ),
      ),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address, { idleTimeout: 300 });
    const response = await post(snooze, chatBody({ stream: true }));
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text.startsWith('data: {"a":1}\n\n')).toBe(true);
    const events = text.split("\n\n").filter(Boolean);
    expect(JSON.parse(events[1]!.slice("data: ".length)).error).toMatchObject({
      type: "server_error",
      code: "upstream_idle_timeout",
    });
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(await upstreamErrors(snooze, "idle-timeout")).toBe(1);
  });

  test("an SSE stream with a Content-Length that breaks off, or goes quiet: the error event and [DONE] end it, the client is not left waiting for the declared bytes (found by an outside tester)", async () => {
    for (const [end, code] of [
      ["close", "upstream_broken"],
      ["stall", "upstream_idle_timeout"],
    ] as const) {
      const engine = await rawEngine((socket) =>
        socket.once("data", () => {
          socket.write(
            'HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 500\r\n\r\ndata: {"a":1}\n\n',
          );
          if (end === "close") setTimeout(() => socket.destroy(), 100);
        }),
      );
      cleanups.push(() => engine.close());
      const snooze = await activatorFor(engine.address, { idleTimeout: 300 });
      const response = await post(snooze, chatBody({ stream: true }));
      expect(response.status).toBe(200);
      const events = (await response.text()).split("\n\n").filter(Boolean);
      expect(events[0]).toBe('data: {"a":1}');
      expect(JSON.parse(events[1]!.slice("data: ".length)).error.code).toBe(code);
      expect(events.slice(2)).toEqual(["data: [DONE]"]);
    }
  });

  test("an error answer labelled SSE with a Content-Length, whose head went on (it stalled) and which then breaks off: cut, not left waiting", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        socket.write(
          'HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/event-stream\r\ncontent-length: 500\r\n\r\ndata: {"a":1}\n\n',
        );
        setTimeout(() => socket.destroy(), 1_300);
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze, chatBody({ stream: true }));
    expect(response.status).toBe(500);
    const started = Date.now();
    await expect(response.text()).rejects.toThrow(/terminated/);
    expect(Date.now() - started).toBeLessThan(2_000);
  });

  test("an SSE stream cut in the middle of an event: the error event follows the last whole one (found by an outside tester)", async () => {
    // An engine's read cut mid-event (a slow client's stream reads many events at once): the half
    // event must not reach the client before Snooze's error event, or its parser fails on both.
    const engine = await rawEngine((socket) =>
      socket.once("data", () =>
        socket.write(
          "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
            chunk('data: {"a":1}\n\ndata: {"b":2}\n\ndata: {"c":'),
        ),
      ),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address, { idleTimeout: 300 });
    const response = await post(snooze, chatBody({ stream: true }));
    const events = (await response.text()).split("\n\n").filter(Boolean);
    expect(events.slice(0, 2)).toEqual(['data: {"a":1}', 'data: {"b":2}']);
    expect(JSON.parse(events[2]!.slice("data: ".length)).error.code).toBe("upstream_idle_timeout");
    expect(events.slice(3)).toEqual(["data: [DONE]"]);
  });

  test("an event too long to hold back went out in part: the error event still comes as an event of its own", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () =>
        socket.write(
          "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
            chunk('data: {"a":1}\n\n') +
            chunk(`data: {"b":"${"y".repeat(300_000)}`),
        ),
      ),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address, { idleTimeout: 300 });
    const response = await post(snooze, chatBody({ stream: true }));
    const events = (await response.text()).split("\n\n").filter(Boolean);
    expect(events[0]).toBe('data: {"a":1}');
    expect(events[1]).toMatch(/^data: \{"b":"y+$/);
    expect(JSON.parse(events[2]!.slice("data: ".length)).error.code).toBe("upstream_idle_timeout");
    expect(events.slice(3)).toEqual(["data: [DONE]"]);
  });

  test("an SSE stream's last bytes reach the client as the engine sent them, event end or not", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () =>
        socket.end(
          "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
            chunk('data: {"a":1}\r\n\r\ndata: {"b"') +
            chunk(":2}\n\ndata: [DONE]") +
            "0\r\n\r\n",
        ),
      ),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze, chatBody({ stream: true }));
    expect(await response.text()).toBe('data: {"a":1}\r\n\r\ndata: {"b":2}\n\ndata: [DONE]');
  });

  test("a sized answer that stalls is cut off (the client sees the break, not a short body)", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () =>
        socket.write(
          'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{"partial":',
        ),
      ),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address, { idleTimeout: 300 });
    const response = await post(snooze);
    expect(response.status).toBe(200);
    await expect(response.text()).rejects.toThrow();
  });
  test("a sized answer whose engine closes after its head, before a byte of its body: 502 upstream_broken, not an empty reply (found by an outside tester)", async () => {
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        socket.write("HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n");
        socket.end();
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze);
    expect(response.status).toBe(502);
    expect(await errorOf(response)).toMatchObject({ type: "server_error", code: "upstream_broken" });
    expect(await upstreamErrors(snooze, "broken")).toBe(1);
  });

  test("a 204 whose engine declared a Content-Length: passed on without it, so a client that reads the length is not left waiting for a body a 204 never has (found by an outside tester)", async () => {
    let answers = 0;
    const engine = await rawEngine((socket) =>
      socket.on("data", () => {
        answers++;
        // Its bytes after the head are not a body (a 204 has none): the connection is not used again.
        socket.write('HTTP/1.1 204 No Content\r\ncontent-length: 11\r\n\r\n{"a":"b12"}');
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await activatorFor(engine.address);
    const body = chatBody();
    const client = connect(snooze.port, "127.0.0.1");
    cleanups.push(() => client.destroy());
    client.setEncoding("latin1");
    client.write(
      `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    let reply = "";
    for await (const data of client) {
      reply += data;
      if (reply.includes("\r\n\r\n")) break;
    }
    const head = reply.slice(0, reply.indexOf("\r\n\r\n"));
    expect(head).toMatch(/^HTTP\/1\.1 204 /);
    // RFC 9110 §8.6: a server MUST NOT send a Content-Length in a 204.
    expect(head).not.toMatch(/\r\ncontent-length:/i);
    expect((await post(snooze)).status).toBe(204);
    expect(answers).toBe(2);
  });
});

/**
 * A stream held over a second, so hold progress answers 200; then the engine at `address` is
 * ready. The SSE events the client got, whole.
 */
async function eventsAfterProgress(
  address: string,
  settings: Parameters<typeof startActivator>[0] = {},
): Promise<string[]> {
  const snooze = await startActivator({ holdBudget: 5_000, streamProgress: true, ...settings });
  cleanups.push(() => snooze.close());
  const answer = post(snooze, chatBody({ stream: true }));
  // Progress starts after a second held; the engine is ready a little later.
  await new Promise((resolve) => setTimeout(resolve, 1_300));
  snooze.plane.readyAt("m", address);
  const response = await answer;
  expect(response.status).toBe(200);
  return (await response.text()).split("\n\n").filter(Boolean);
}

describe("after `data: [DONE]` an OpenAI stream is over (found by an outside tester: an engine that kept the stream open had an idle-timeout error event appended after [DONE])", () => {
  const head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";

  test("an engine that keeps the stream open after [DONE]: the client's answer ends with [DONE] at once, and nothing follows it", async () => {
    // As the engine may write it: [DONE] in a read of its own, with the event before it, cut in
    // two reads, with CRLF blank lines; and bytes after it (a stray event), then silence.
    for (const reads of [
      ['data: {"a":1}\n\n', "data: [DONE]\n\n"],
      ['data: {"a":1}\n\ndata: [DONE]\n\ndata: {"late":1}\n\n'],
      ['data: {"a":1}\n\ndata: [DO', "NE]\n\n", 'data: {"late":1}\n\n'],
      ['data: {"a":1}\r\n\r\ndata:[DONE]\r\n\r\n'],
    ]) {
      const engine = await rawEngine((socket) =>
        socket.once("data", async () => {
          socket.write(head);
          for (const read of reads) {
            socket.write(chunk(read));
            await new Promise((resolve) => setTimeout(resolve, 20));
          }
        }),
      );
      cleanups.push(() => engine.close());
      const snooze = await activatorFor(engine.address, { idleTimeout: 3_000 });
      const started = performance.now();
      const response = await post(snooze, chatBody({ stream: true }));
      expect(response.status).toBe(200);
      const text = await response.text();
      const done = reads.join("").search(/data: ?\[DONE\]/);
      const blank = reads.join("").includes("\r\n") ? "\r\n\r\n" : "\n\n";
      expect(text).toBe(reads.join("").slice(0, reads.join("").indexOf(blank, done) + blank.length));
      // Not when the engine's idle timeout fires: OpenAI's clients read a stream to its end.
      expect(performance.now() - started).toBeLessThan(1_500);
      // The engine's request is let go soon after, not held for its idleTimeout: it counts as
      // answered, not as a failure.
      await until(() => engine.connections.size === 0, 2_000, "the engine's connection to be let go");
      expect(await upstreamErrors(snooze, "idle-timeout")).toBe(0);
      expect(
        metricValue(await snooze.registry.metrics(), "snooze_requests_total", { model: "m", code: "200" }),
      ).toBe(1);
    }
  });

  test("an engine that ends its stream after [DONE] keeps its connection for the next request", async () => {
    let connections = 0;
    const engine = await httpEngine((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "text/event-stream" });
      res.write('data: {"a":1}\n\n');
      res.write("data: [DONE]\n\n");
      setTimeout(() => res.end(), 20);
    });
    engine.server.on("connection", () => connections++);
    cleanups.push(() => {
      engine.server.closeAllConnections();
      engine.server.close();
    });
    const snooze = await activatorFor(engine.address);
    for (let i = 0; i < 3; i++) {
      const response = await post(snooze, chatBody({ stream: true }));
      expect(await response.text()).toBe('data: {"a":1}\n\ndata: [DONE]\n\n');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(connections).toBe(1);
  });
});

describe("a held request with `stream: true` whose engine answers plain JSON (found by an outside tester: the answer was lost)", () => {
  test("on a route vLLM never streams (embeddings), hold progress opens no stream: the JSON answer comes as it is", async () => {
    const engine = await httpEngine((req, res) => {
      req.resume();
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end('{"object":"list","data":[{"embedding":[0.5]}]}');
      });
    });
    cleanups.push(() => engine.server.close());
    const snooze = await startActivator({ holdBudget: 5_000, streamProgress: true });
    cleanups.push(() => snooze.close());
    const answer = fetch(`${snooze.url}/v1/embeddings`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "m", input: "hi", stream: true }),
      signal: AbortSignal.timeout(10_000),
    });
    // Held past the second after which progress would begin.
    await new Promise((resolve) => setTimeout(resolve, 1_300));
    snooze.plane.readyAt("m", engine.address);
    const response = await answer;
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(await response.json()).toEqual({ object: "list", data: [{ embedding: [0.5] }] });
  });

  test("where progress already opened a stream, a 200 that is not SSE arrives as the data of one event, then [DONE]", async () => {
    const answer = { id: "c1", object: "chat.completion", choices: [{ message: { content: "a\nb" } }] };
    const engine = await httpEngine((req, res) => {
      req.resume();
      res.writeHead(200, { "content-type": "application/json" });
      // Pretty-printed with CRLF, a CRLF cut between two writes.
      const text = JSON.stringify(answer, null, 2).replaceAll("\n", "\r\n");
      const cut = text.indexOf("\n", 10);
      res.write(text.slice(0, cut));
      setTimeout(() => res.end(text.slice(cut)), 20);
    });
    cleanups.push(() => engine.server.close());
    const events = await eventsAfterProgress(engine.address);
    expect(events[0]).toMatch(/^: /);
    expect(events.at(-1)).toBe("data: [DONE]");
    // As an SSE parser reads it: the data lines joined with a line break.
    const data = events
      .at(-2)!
      .split("\n")
      .map((line) => line.slice("data: ".length))
      .join("\n");
    expect(JSON.parse(data)).toEqual(answer);
  });
});

describe("the engine refuses a request whose hold progress already answered 200", () => {
  test("its error arrives as one SSE event in the open stream, then [DONE]", async () => {
    const engine = await httpEngine((req, res) => {
      req.resume();
      res.writeHead(400, { "content-type": "application/json" });
      // Written in two parts, with a line break, as a pretty-printing engine might.
      res.write('{"error": {"message": "max_tokens is too large",\n');
      setTimeout(() => res.end('"code": "bad_max_tokens"}}'), 20);
    });
    cleanups.push(() => engine.server.close());
    const events = await eventsAfterProgress(engine.address);
    expect(events[0]).toMatch(/^: /);
    expect(JSON.parse(events.at(-2)!.slice("data: ".length))).toEqual({
      error: { message: "max_tokens is too large", code: "bad_max_tokens" },
    });
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  test("an engine that closes the connection without answering, into a stream progress opened: sent again once, then an error event", async () => {
    // Found by an outside tester: the stream was cut with no event, and not retried.
    const engine = await closingEngine();
    const events = await eventsAfterProgress(engine.address);
    expect(JSON.parse(events.at(-2)!.slice("data: ".length)).error).toMatchObject({
      code: "upstream_died",
    });
    expect(events.at(-1)).toBe("data: [DONE]");
    expect(engine.seen()).toBe(2);
  });

  test("an engine that never answers, into a stream progress opened: the upstream_timeout error event, then [DONE], not a cut", async () => {
    // Found while testing a status past 599: hold progress writes its head with writeHead, which
    // getHeader does not see, so the stream was taken for one that is not SSE and cut.
    const engine = await rawEngine((socket) => socket.resume());
    cleanups.push(() => engine.close());
    const events = await eventsAfterProgress(engine.address, { firstByteTimeout: 300 });
    expect(events[0]).toMatch(/^: /);
    expect(JSON.parse(events.at(-2)!.slice("data: ".length)).error).toMatchObject({
      code: "upstream_timeout",
    });
    expect(events.at(-1)).toBe("data: [DONE]");
  });

  test("an error not in OpenAI's shape is put in it, so the openai client raises it; a huge one is not kept whole", async () => {
    /** What the openai client makes of the engine's answer, once progress has answered 200. */
    const afterProgress = async (status: number, contentType: string, body: string) => {
      const engine = await answeringEngine(status, contentType, body);
      const snooze = await startActivator({ holdBudget: 5_000, streamProgress: true });
      cleanups.push(() => snooze.close());
      const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
      const chunks: unknown[] = [];
      const outcome = (async () => {
        const stream = await client.chat.completions.create({
          model: "m",
          messages: [{ role: "user", content: "hi" }],
          stream: true,
        });
        for await (const chunk of stream) chunks.push(chunk);
      })().then(
        () => undefined,
        (error: unknown) => error,
      );
      // Held for over a second (progress opens the stream), then the engine is ready.
      await new Promise((resolve) => setTimeout(resolve, 1_300));
      snooze.plane.readyAt("m", engine.address);
      const error = await outcome;
      expect(chunks).toEqual([]);
      expect(error).toBeInstanceOf(OpenAI.APIError);
      return (error as InstanceType<typeof OpenAI.APIError>).error as Record<string, unknown>;
    };
    // FastAPI's answer for a route the engine does not serve; uvicorn's when the app crashed; an
    // engine that pours out a megabyte with its error.
    expect(await afterProgress(404, "application/json", '{"detail":"Not Found"}')).toEqual({
      message: "The engine answered 404: Not Found.",
      type: "invalid_request_error",
      code: "engine_error",
      param: null,
    });
    expect(await afterProgress(500, "text/plain; charset=utf-8", "Internal Server Error")).toMatchObject({
      message: "The engine answered 500: Internal Server Error.",
      type: "server_error",
    });
    const huge = await afterProgress(500, "text/plain", "y".repeat(1 << 20));
    expect(huge.message).toMatch(/^The engine answered 500: y+…\.$/);
    expect((huge.message as string).length).toBeLessThan(1_100);
  });
});

describe("the engine refuses a request (no hold progress): its error answer as the openai client sees it", () => {
  /** The engine answers this; the request goes through Snooze to it, by the openai client and by fetch. */
  const refused = async (status: number, contentType: string, body: string) => {
    const engine = await answeringEngine(status, contentType, body);
    const snooze = await activatorFor(engine.address);
    const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
    const error = await client.chat.completions
      .create({ model: "m", messages: [{ role: "user", content: "hi" }] })
      .then(
        () => undefined,
        (e: unknown) => e,
      );
    expect(error).toBeInstanceOf(OpenAI.APIError);
    const raw = await post(snooze);
    return {
      sdk: error as InstanceType<typeof OpenAI.APIError>,
      status: raw.status,
      contentType: raw.headers.get("content-type"),
      text: await raw.text(),
    };
  };

  test("vLLM's own error passes untouched; older vLLM's flat one and FastAPI's keep their fields beside `error`; plain text becomes JSON", async () => {
    const vllm =
      '{"error":{"message":"max_tokens is too large","type":"BadRequestError","param":"max_tokens","code":400}}';
    const current = await refused(400, "application/json", vllm);
    expect(current.text).toBe(vllm);
    expect(current.sdk.message).toBe("400 max_tokens is too large");

    const flat = {
      object: "error",
      message: "max_tokens is too large",
      type: "BadRequestError",
      param: null,
      code: 400,
    };
    const older = await refused(400, "application/json", JSON.stringify(flat));
    expect(older.sdk.status).toBe(400);
    expect(older.sdk.message).toBe("400 max_tokens is too large");
    expect(JSON.parse(older.text)).toEqual({
      ...flat,
      error: { message: "max_tokens is too large", type: "BadRequestError", param: null, code: "400" },
    });

    // Found by an outside tester: the SDK said "404 status code (no body)".
    const fastapi = await refused(404, "application/json", '{"detail":"Not Found"}');
    expect(fastapi.sdk.message).toBe("404 The engine answered 404: Not Found.");
    expect(JSON.parse(fastapi.text)).toMatchObject({ detail: "Not Found", error: { code: "engine_error" } });

    const crashed = await refused(500, "text/plain; charset=utf-8", "Internal Server Error");
    expect(crashed).toMatchObject({ status: 500, contentType: "application/json" });
    expect(crashed.sdk.message).toBe("500 The engine answered 500: Internal Server Error.");
  });

  test("the engine's own fields are kept as written; a compressed error is read; headers about the old bytes go", async () => {
    // Found by an outside tester: big numbers came back rounded, a gzip error was not read.
    const fields = await refused(
      400,
      "application/json",
      '{ "detail": "Not Found", "id": 12345678901234567890 }',
    );
    expect(fields.text).toContain('"id": 12345678901234567890');
    expect(JSON.parse(fields.text).error.code).toBe("engine_error");

    const engine = await httpEngine((req, res) => {
      req.resume();
      res.writeHead(400, { "content-type": "application/json", "content-encoding": "gzip", etag: '"abc"' });
      res.end(gzipSync('{"detail":"gzipped detail"}'));
    });
    cleanups.push(() => engine.server.close());
    const snooze = await activatorFor(engine.address);
    const response = await post(snooze, chatBody(), { "accept-encoding": "gzip" });
    expect(response.status).toBe(400);
    expect(response.headers.get("content-encoding")).toBeNull();
    expect(response.headers.get("etag")).toBeNull();
    expect(await errorOf(response)).toMatchObject({ message: "The engine answered 400: gzipped detail." });
  });

  test("a Content-Encoding sent on two lines (a sidecar adding one) is read as the one list they make, not a 502 from Snooze's own code", async () => {
    // Found by an outside tester: undici gives two lines as an array, and Snooze called `trim` on
    // it: `502 upstream_error` "header?.trim is not a function" for an answer that was fine.
    const engine = await httpEngine((req, res) => {
      req.resume();
      const failing = req.headers["x-fail"] === "1";
      res.setHeader("content-encoding", failing ? ["gzip", "identity"] : ["identity", "identity"]);
      res.writeHead(failing ? 400 : 200, { "content-type": "application/json" });
      res.end(failing ? gzipSync('{"detail":"gzipped detail"}') : '{"ok":true}');
    });
    cleanups.push(() => engine.server.close());
    const snooze = await activatorFor(engine.address);
    const fine = await post(snooze);
    expect(fine.status).toBe(200);
    expect(await fine.json()).toEqual({ ok: true });
    const refused = await post(snooze, chatBody(), { "accept-encoding": "gzip", "x-fail": "1" });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("content-encoding")).toBeNull();
    expect(await errorOf(refused)).toMatchObject({ message: "The engine answered 400: gzipped detail." });
  });

  test("an error body that breaks off, stalls, or nests 10,000 deep: the client is told, never left without an answer", async () => {
    // Found by an outside tester: the first and the last got no answer at all, the second none
    // until idleTimeout.
    const engine = await httpEngine((req, res) => {
      req.resume();
      const kind = req.headers["x-fault"];
      if (kind === "deep") {
        res.writeHead(400, { "content-type": "application/json" });
        res.end(`{"detail":${"[".repeat(10_000)}${"]".repeat(10_000)}}`);
        return;
      }
      res.writeHead(400, { "content-type": "application/json", "content-length": "100" });
      // A head alone, then nothing (found by an outside tester: the client got no head at all).
      if (kind === "head") {
        res.flushHeaders();
        return;
      }
      res.write('{"detail": "half');
      if (kind === "drop") setTimeout(() => res.socket?.destroy(), 50);
    });
    cleanups.push(() => engine.server.close());
    const snooze = await activatorFor(engine.address, { idleTimeout: 20_000 });
    const dropped = await post(snooze, chatBody(), { "x-fault": "drop" });
    expect(dropped.status).toBe(502);
    expect(await errorOf(dropped)).toMatchObject({ code: "upstream_broken" });
    const stalled = await post(snooze, chatBody(), { "x-fault": "stall" });
    // The head goes on after a moment, as the engine sent it (not after idleTimeout's 20 s).
    expect(stalled.status).toBe(400);
    await stalled.body?.cancel();
    const headOnly = await post(snooze, chatBody(), { "x-fault": "head" });
    expect(headOnly.status).toBe(400);
    await headOnly.body?.cancel();
    const deep = await post(snooze, chatBody(), { "x-fault": "deep" });
    expect(deep.status).toBe(400);
    expect(await errorOf(deep)).toMatchObject({ code: "engine_error" });
  });

  test("an error answer too big to be a message passes untouched, whole", async () => {
    const huge = "y".repeat(1 << 20);
    const answer = await refused(500, "text/plain", huge);
    expect(answer).toMatchObject({ status: 500, contentType: "text/plain" });
    expect(answer.text).toBe(huge);
  });
});

describe("an engine that answers before it has read the whole request body, and reads no more of it", () => {
  test("each request gets the engine's answer: the connection left with an unsent body is not used again (found by an outside tester: the next request was written behind 8 MB the engine never read, and waited out firstByteTimeout for a 504 that said not to retry)", async () => {
    const refusal = JSON.stringify({
      error: { message: "request too large", type: "BadRequestError", code: 413 },
    });
    let seen = 0;
    const engine = await rawEngine((socket) =>
      socket.once("data", () => {
        seen++;
        socket.write(
          `HTTP/1.1 413 Payload Too Large\r\ncontent-type: application/json\r\ncontent-length: ${refusal.length}\r\n\r\n${refusal}`,
        );
        // Reads nothing more: the rest of the body stays in the kernel's buffers and Snooze's.
        socket.pause();
      }),
    );
    cleanups.push(() => engine.close());
    const snooze = await startActivator(
      { holdBudget: 5_000, concurrency: 1, firstByteTimeout: 3_000 },
      { maxBodySize: 32 << 20, maxHeldBytes: 64 << 20 },
    );
    cleanups.push(() => snooze.close());
    snooze.plane.readyAt("m", engine.address);
    const body = chatBody({ messages: [{ role: "user", content: "x".repeat(8 << 20) }] });
    for (let i = 0; i < 3; i++) {
      const response = await post(snooze, body);
      expect(response.status).toBe(413);
      expect(await response.json()).toEqual(JSON.parse(refusal));
    }
    expect(seen).toBe(3);
    expect(await upstreamErrors(snooze, "first-byte-timeout")).toBe(0);
    await until(
      async () =>
        metricValue(await snooze.registry.metrics(), "snooze_in_flight_requests", { model: "m" }) === 0,
      2_000,
      "nothing in flight",
    );
  });
});

describe("Expect: 100-continue", () => {
  async function echoEngine() {
    const seen: Record<string, string | string[] | undefined>[] = [];
    const engine = await httpEngine((req, res) => {
      seen.push(req.headers);
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ length: body.length }));
      });
    });
    cleanups.push(() => engine.server.close());
    return { ...engine, seen };
  }

  const head = (path: string, length: number, extra = "") =>
    `POST ${path} HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${length}\r\nexpect: 100-continue\r\n${extra}\r\n`;

  test("100 Continue, then the body, then the engine's answer; Expect is not forwarded", async () => {
    const engine = await echoEngine();
    const snooze = await activatorFor(engine.address);
    const body = chatBody();
    const reply = await rawRequest(snooze.port, head("/v1/chat/completions", body.length), body, {
      waitForContinue: true,
    });
    expect(reply.startsWith("HTTP/1.1 100 Continue\r\n")).toBe(true);
    expect(finalStatus(reply)).toBe(200);
    expect(finalBody(reply)).toEqual({ length: body.length });
    expect(engine.seen).toHaveLength(1);
    expect(engine.seen[0]!.expect).toBeUndefined();
  });

  test("refused before the body: a body over maxBodySize → 413, a wrong path → 404, no 100 Continue", async () => {
    const engine = await echoEngine();
    const snooze = await activatorFor(engine.address, {});
    const tooLarge = await rawRequest(snooze.port, head("/v1/chat/completions", 2 << 20), "x", {
      waitForContinue: true,
    });
    expect(tooLarge).not.toContain("100 Continue");
    expect(finalStatus(tooLarge)).toBe(413);
    const wrongPath = await rawRequest(snooze.port, head("/v1/../sleep", 10), "x", { waitForContinue: true });
    expect(wrongPath).not.toContain("100 Continue");
    expect(finalStatus(wrongPath)).toBe(404);
    expect(engine.seen).toHaveLength(0);
  });
});

describe("connections per engine", () => {
  test("maxConnections bounds the engine's connections; the rest wait in the hold queue and all are served", async () => {
    let open = 0;
    let most = 0;
    const engine = await httpEngine((req, res) => {
      req.resume();
      req.on("end", () => setTimeout(() => res.end("{}"), 30));
    });
    engine.server.on("connection", (socket) => {
      most = Math.max(most, ++open);
      socket.on("close", () => open--);
    });
    cleanups.push(() => {
      engine.server.closeAllConnections();
      engine.server.close();
    });
    const snooze = await activatorFor(engine.address, { maxConnections: 4, holdBudget: 20_000 });
    const statuses = await Promise.all(Array.from({ length: 60 }, () => post(snooze).then((r) => r.status)));
    expect(statuses.every((s) => s === 200)).toBe(true);
    expect(most).toBeLessThanOrEqual(4);
    expect(most).toBeGreaterThan(0);
  });

  test("requests waiting for a connection still have the hold budget: 503 hold_budget_exceeded", async () => {
    const engine = await httpEngine((req, res) => {
      req.resume();
      req.on("end", () => setTimeout(() => res.end("{}"), 1_500));
    });
    cleanups.push(() => {
      engine.server.closeAllConnections();
      engine.server.close();
    });
    const snooze = await activatorFor(engine.address, { maxConnections: 1, holdBudget: 300 });
    const [first, second] = await Promise.all([post(snooze), post(snooze)]);
    expect(first.status).toBe(200);
    expect(second.status).toBe(503);
    expect(second.headers.get("retry-after")).toBeTruthy();
    // Never sent to an engine: a retry repeats no work, so OpenAI's clients may retry it.
    expect(second.headers.get("x-should-retry")).toBeNull();
    expect(await errorOf(second)).toMatchObject({ code: "hold_budget_exceeded" });
  });
});

/** An engine that starts a stream (one event) and then sends nothing, and never answers a plain request. */
async function stallingEngine() {
  const engine = await rawEngine((socket) =>
    socket.once("data", (data) => {
      if (String(data).includes('"stream":true'))
        socket.write(
          "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n" +
            chunk('data: {"a":1}\n\n'),
        );
    }),
  );
  cleanups.push(() => engine.close());
  return engine;
}

describe("malformed HTTP pipelined after good requests on the same connection", () => {
  /** Writes `bytes` on a connection that stays half-open, and reads until the server closes it. */
  async function pipelined(port: number, bytes: string): Promise<string> {
    const socket = connect({ port, host: "127.0.0.1", allowHalfOpen: true });
    cleanups.push(() => socket.destroy());
    socket.setEncoding("latin1");
    let reply = "";
    socket.on("data", (data: string) => (reply += data));
    const ended = new Promise((resolve) => socket.once("end", resolve));
    socket.write(bytes);
    await ended;
    return reply;
  }
  const post = (body: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
  // Status lines, wherever they start (an answer's body ends with no line break before the next).
  const statuses = (reply: string) => [...reply.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => Number(m[1]));

  test("the good ones are answered first, in order (a stream to its end), then the 400, then the close", async () => {
    // Found by an outside tester: the 400 went out in place of the first answer, and a stream under
    // way was cut.
    const engine = await httpEngine((req, res) => {
      let body = "";
      req.on("data", (chunk) => (body += chunk));
      req.on("end", () => {
        if (!body.includes('"stream":true')) return void res.end('{"answer":1}');
        res.writeHead(200, { "content-type": "text/event-stream" });
        let n = 0;
        const timer = setInterval(() => {
          res.write(`data: {"n":${++n}}\n\n`);
          if (n === 5) {
            clearInterval(timer);
            res.end("data: [DONE]\n\n");
          }
        }, 50);
      });
    });
    cleanups.push(() => engine.server.close());
    const snooze = await activatorFor(engine.address);
    const reply = await pipelined(
      snooze.port,
      `${post(chatBody()) + post(chatBody({ stream: true }))}NOT HTTP\r\n\r\n`,
    );
    expect(statuses(reply)).toEqual([200, 200, 400]);
    expect(reply.indexOf('{"answer":1}')).toBeLessThan(reply.indexOf("text/event-stream"));
    expect(reply).toContain('data: {"n":5}');
    expect(reply.indexOf("data: [DONE]")).toBeLessThan(reply.indexOf("HTTP/1.1 400"));
    expect(finalBody(reply).error.code).toBe("malformed_request");
  });

  test("a held one is answered when its hold ends, then the 400", async () => {
    const snooze = await startActivator({ holdBudget: 300 });
    cleanups.push(() => snooze.close());
    const reply = await pipelined(snooze.port, `${post(chatBody())}NOT HTTP\r\n\r\n`);
    expect(statuses(reply)).toEqual([503, 400]);
    expect(reply).toContain("hold_budget_exceeded");
    expect(snooze.activator.routes.get("m")!.held).toBe(0);
  });

  test("requests pipelined behind a held one are not read ahead of their turn (found by an outside tester)", async () => {
    // Before, Node parsed every one at once, and each waited whole for its turn: 3 MB of pipelined
    // `GET /healthz` behind one held request took 1 GB, and answering them blocked the process for
    // seconds, every other client with it.
    const snooze = await startActivator({ holdBudget: 500 });
    cleanups.push(() => snooze.close());
    let parsed = 0;
    snooze.server.on("request", () => parsed++);
    const socket = connect({ port: snooze.port, host: "127.0.0.1" });
    cleanups.push(() => socket.destroy());
    socket.setEncoding("latin1");
    let reply = "";
    socket.on("data", (data: string) => (reply += data));
    await once(socket, "connect");
    const probes = 20_000;
    socket.write(post(chatBody()) + "GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n".repeat(probes));
    await new Promise((resolve) => setTimeout(resolve, 200));
    // What one read of the connection brought (64 KiB, some 2,000 of them), not all.
    expect(parsed).toBeLessThan(5_000);
    // Then each is read and answered in turn, once the held one is.
    await until(() => statuses(reply).length === probes + 1, 20_000, "every request answered");
    expect(statuses(reply).slice(0, 2)).toEqual([503, 200]);
    expect(parsed).toBe(probes + 1);
  });

  describe("nothing behind the connection's last answer reaches the engine (found by an outside tester)", () => {
    /** An engine that counts the requests it was sent; each answer comes after 50 ms. */
    async function countingEngine() {
      const seen = { requests: 0 };
      const engine = await httpEngine((req, res) => {
        seen.requests++;
        req.resume();
        req.on("end", () => setTimeout(() => res.end('{"answer":1}'), 50));
      });
      cleanups.push(() => engine.server.close());
      return { seen, snooze: await activatorFor(engine.address) };
    }
    const withHeader = (header: string) => post(chatBody()).replace("\r\n\r\n", `\r\n${header}\r\n\r\n`);

    test("a 417 between good ones: each is answered in turn (before, the one behind it went to the engine and its answer was thrown away)", async () => {
      const { seen, snooze } = await countingEngine();
      const reply = await pipelined(
        snooze.port,
        post(chatBody()) + withHeader("expect: foo") + post(chatBody()) + withHeader("connection: close"),
      );
      expect(statuses(reply)).toEqual([200, 417, 200, 200]);
      expect(seen.requests).toBe(3);
    });

    test("behind the client's own `Connection: close`: not served (Node's rule, kept by the turns)", async () => {
      const { seen, snooze } = await countingEngine();
      const reply = await pipelined(snooze.port, withHeader("connection: close") + post(chatBody()));
      expect(statuses(reply)).toEqual([200]);
      expect(seen.requests).toBe(1);
    });

    test("pipelined good ones are each served, in turn, on the open connection", async () => {
      const { seen, snooze } = await countingEngine();
      const reply = await pipelined(
        snooze.port,
        post(chatBody()) + post(chatBody()) + withHeader("connection: close"),
      );
      expect(statuses(reply)).toEqual([200, 200, 200]);
      expect(seen.requests).toBe(3);
    });

    test("answers Snooze gives itself to requests without a body keep the connection open (found by an outside tester)", async () => {
      // Before, every one closed it: an SDK's `models.list()` cost a new connection each time.
      const { seen, snooze } = await countingEngine();
      const reply = await pipelined(
        snooze.port,
        "GET /v1/models HTTP/1.1\r\nhost: x\r\n\r\n" +
          "GET /v1/nothing HTTP/1.1\r\nhost: x\r\n\r\n" +
          "POST /v1/nothing HTTP/1.1\r\nhost: x\r\ncontent-length: 0\r\n\r\n" +
          withHeader("connection: close"),
      );
      expect(statuses(reply)).toEqual([200, 404, 404, 200]);
      expect(reply.match(/\r\nconnection: close\r\n/gi)).toHaveLength(1);
      expect(seen.requests).toBe(1);
    });

    test("an upgrade Snooze does not make is answered with a close: a request behind it is not left waiting", async () => {
      // Node reads nothing after an upgrade request: before, the connection stayed open, the
      // request behind it unanswered, until the keep-alive timeout (65 s).
      const { seen, snooze } = await countingEngine();
      const reply = await pipelined(
        snooze.port,
        withHeader("connection: upgrade\r\nupgrade: foo") + post(chatBody()),
      );
      expect(statuses(reply)).toEqual([200]);
      expect(reply).toMatch(/\r\nconnection: close\r\n/i);
      expect(seen.requests).toBe(1);
    });
  });

  test("a request whose own body is malformed gets the 400 at once", async () => {
    const snooze = await startActivator({ holdBudget: 30_000 });
    cleanups.push(() => snooze.close());
    const reply = await pipelined(
      snooze.port,
      "POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\nnot a chunk\r\n",
    );
    expect(statuses(reply)).toEqual([400]);
    expect(finalBody(reply).error.code).toBe("malformed_request");
  });
});

test("requests refused before routing are counted under no model, as the client was answered (found by an outside tester)", async () => {
  const snooze = await startActivator();
  cleanups.push(() => snooze.close());
  const chatHead = (extra: string) =>
    `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 2\r\n${extra}\r\n`;
  const asked: [string, string, number][] = [
    ["malformed", "GARBAGE\r\n\r\n", 400],
    ["headers too large", `GET /v1/models HTTP/1.1\r\nhost: x\r\nx-big: ${"x".repeat(20_000)}\r\n\r\n`, 431],
    ["a URL too long", `GET /v1/${"x".repeat(20_000)} HTTP/1.1\r\nhost: x\r\n\r\n`, 414],
    ["HTTP/2.0 in a request line", "GET /v1/models HTTP/2.0\r\nhost: x\r\n\r\n", 505],
    ["two Host headers", chatHead("host: y\r\n"), 400],
    ["no Host header", "POST /v1/chat/completions HTTP/1.1\r\ncontent-length: 2\r\n\r\n", 400],
    ["an expectation Snooze cannot meet", chatHead("expect: foo\r\n"), 417],
    ["CONNECT", "CONNECT x:443 HTTP/1.1\r\nhost: x:443\r\n\r\n", 405],
  ];
  for (const [what, head, status] of asked) {
    const before =
      metricValue(await snooze.registry.metrics(), "snooze_requests_total", {
        model: "",
        code: String(status),
      }) ?? 0;
    const reply = await rawRequest(snooze.port, head, head.startsWith("POST") ? "{}" : "");
    expect(reply, what).toMatch(new RegExp(`^HTTP/1\\.1 ${status} `));
    const after = metricValue(await snooze.registry.metrics(), "snooze_requests_total", {
      model: "",
      code: String(status),
    });
    expect(after, what).toBe(before + 1);
  }
});

describe("a replica's drain ends what still runs on it", () => {
  test("told why: its drain time ran out (503 drain_timeout), or its engine stopped answering (502 upstream_unresponsive once the answer began; before, the request is sent to the replacement)", async () => {
    // Found by an outside tester: requests on a frozen engine were told they ran past a drain time.
    const engine = await stallingEngine();
    const replacement = await answeringEngine(200, "application/json", '{"served":"by the replacement"}');
    const snooze = await activatorFor(engine.address);
    const drain = async (unresponsive: boolean) => {
      snooze.plane.readyAt("m", engine.address);
      const plain = post(snooze);
      const stream = await post(snooze, chatBody({ stream: true }));
      await until(async () => engine.connections.size === 2, 2_000, "both requests at the engine");
      const now = Date.now();
      snooze.plane.emit({
        model: "m",
        replica: "m-0",
        address: engine.address,
        tier: "draining",
        since: now,
        endsAt: now,
        ...(unresponsive ? { unresponsive: true as const } : {}),
      });
      // The control plane replaces an unresponsive engine.
      if (unresponsive)
        setTimeout(
          () =>
            snooze.plane.emit({
              model: "m",
              replica: "m-1",
              address: replacement.address,
              tier: "ready",
              since: Date.now(),
            }),
          100,
        );
      return { plain: await plain, streamed: await stream.text() };
    };
    const timedOut = await drain(false);
    expect(timedOut.plain.status).toBe(503);
    expect(await errorOf(timedOut.plain)).toMatchObject({ code: "drain_timeout" });
    expect(timedOut.streamed).toContain('"code":"drain_timeout"');
    const frozen = await drain(true);
    // Nothing of an answer had reached the client: held again, then served by the replacement
    // (found by an outside tester: it was answered 502 upstream_unresponsive and lost).
    expect(frozen.plain.status).toBe(200);
    expect(await frozen.plain.json()).toEqual({ served: "by the replacement" });
    // The stream had begun: it cannot be sent again, and is told why it ends.
    expect(frozen.streamed).toContain('"code":"upstream_unresponsive"');
    expect(frozen.streamed).toMatch(/stopped answering/);
    expect(frozen.streamed.trim().endsWith("data: [DONE]")).toBe(true);
    expect(await upstreamErrors(snooze, "unresponsive")).toBe(2);
    const metrics = await snooze.registry.metrics();
    expect(metricValue(metrics, "snooze_resent_requests_total", { reason: "unresponsive" })).toBe(1);
  });
});

describe("shutdown ends what the grace did not", () => {
  test("a request the engine never answers gets 503 shutting_down; a stalled stream an SSE error event", async () => {
    const engine = await stallingEngine();
    const snooze = await startActivator();
    snooze.plane.readyAt("m", engine.address);
    const plain = post(snooze);
    const stream = await post(snooze, chatBody({ stream: true }));
    const streamed = stream.text();
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    await snooze.activator.shutdown(300);
    const took = performance.now() - started;
    expect(took).toBeGreaterThanOrEqual(250);
    expect(took).toBeLessThan(2_000);
    const answered = await plain;
    expect(answered.status).toBe(503);
    expect(await errorOf(answered)).toMatchObject({ code: "shutting_down" });
    const text = await streamed;
    expect(text).toContain('"code":"shutting_down"');
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    await snooze.close();
  });

  test("a body still arriving at SIGTERM is waited for and served; one still arriving past the grace gets 503", async () => {
    // Found by an outside tester: an upload under way at SIGTERM was cut without an answer.
    const engine = await httpEngine((req, res) => {
      req.resume();
      req.on("end", () => res.end("{}"));
    });
    cleanups.push(() => engine.server.close());
    const snooze = await startActivator();
    cleanups.push(() => snooze.close());
    snooze.plane.readyAt("m", engine.address);
    const body = chatBody();
    const head = `POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n`;
    /** Sends the head and 10 bytes, then `rest` of the body: all of it at once, or a byte every 50 ms. */
    const upload = (rest: Promise<unknown> | "drip") => {
      const socket = connect(snooze.port, "127.0.0.1");
      socket.setEncoding("latin1");
      let reply = "";
      socket.on("data", (data: string) => (reply += data));
      socket.on("error", () => {});
      socket.write(head + body.slice(0, 10));
      let sent = 10;
      const drip =
        rest === "drip"
          ? setInterval(() => {
              if (sent < body.length - 1 && !socket.destroyed) socket.write(body[sent++]!);
            }, 50)
          : void rest.then(() => socket.write(body.slice(10)));
      return new Promise<string>((resolve) =>
        socket.on("close", () => {
          clearInterval(drip);
          resolve(reply);
        }),
      );
    };
    const finish = Promise.withResolvers<void>();
    const finished = upload(finish.promise);
    const stalled = upload(new Promise(() => {}));
    // Still sending, a byte every 50 ms, when the grace ends (found by a later tester: its answer,
    // written but held back until the next tick, was destroyed with the connection).
    const trickling = upload("drip");
    await new Promise((resolve) => setTimeout(resolve, 100));
    const started = performance.now();
    const shutdown = snooze.activator.shutdown(600);
    await new Promise((resolve) => setTimeout(resolve, 100));
    finish.resolve();
    await shutdown;
    expect(performance.now() - started).toBeGreaterThanOrEqual(550);
    // The cut read let go of its bytes (it was not left waiting for a body Node never ends).
    expect(metricValue(await snooze.registry.metrics(), "snooze_held_body_bytes")).toBe(0);
    await snooze.close();
    expect(finalStatus(await finished)).toBe(200);
    const cut = await stalled;
    expect(finalStatus(cut)).toBe(503);
    expect(finalBody(cut).error).toMatchObject({ code: "shutting_down" });
    const dripped = await trickling;
    expect(finalStatus(dripped)).toBe(503);
    expect(finalBody(dripped).error).toMatchObject({ code: "shutting_down" });
  });
});
