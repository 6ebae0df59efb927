import { once } from "node:events";
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { type CloudEventV1, HTTP } from "cloudevents";
import { Registry } from "prom-client";
import { afterEach, describe, expect, test } from "vitest";
import { ceOverrides } from "./ce-overrides.ts";
import {
  CloudEventSink,
  type CloudEventSinkOptions,
  createEventSink,
  eventSourceOf,
  isRetryableStatus,
} from "./cloudevents.ts";
import { decodeHeaderValue } from "./cloudevents-header.ts";
import { createLogger, silentLogger } from "./log.ts";
import { redactUrl } from "./redact-url.ts";

interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  path?: string;
}

const servers: Server[] = [];
const sinks: CloudEventSink[] = [];
afterEach(async () => {
  for (const sink of sinks.splice(0)) await sink.close();
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    server.close();
  }
});

/** A sink endpoint that answers each request with what `answer` does. */
async function endpoint(
  answer: (res: ServerResponse, n: number) => void = (res) => res.writeHead(202).end(),
) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk) => (body += chunk));
    req.on("end", () => {
      received.push({ headers: req.headers, body, path: req.url });
      answer(res, received.length);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  servers.push(server);
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`, received };
}

function sink(options: Partial<CloudEventSinkOptions> & { url: string }) {
  const registry = new Registry();
  const created = new CloudEventSink({
    source: "/test",
    log: silentLogger,
    registry,
    backoffMs: 10,
    ...options,
  });
  sinks.push(created);
  const count = async (outcome: string) => {
    const metric = (await registry.getMetricsAsJSON()).find((m) => m.name === "snooze_cloudevents_total");
    return (metric?.values ?? [])
      .filter((v) => v.labels.outcome === outcome)
      .reduce((sum, v) => sum + Number(v.value), 0);
  };
  return { sink: created, count };
}

/** Reads what arrived as the SDK would, and validates it against the CloudEvents schema. */
function asEvent(r: Received): CloudEventV1<Record<string, unknown>> {
  const event = HTTP.toEvent({ headers: r.headers, body: r.body }) as CloudEventV1<
    Record<string, unknown>
  > & {
    validate(): boolean;
  };
  expect(event.validate()).toBe(true);
  return event;
}

const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";

test("binary mode by default: ce-* headers and the data as a JSON body, valid by the SDK, with the tracing extension", async () => {
  const target = await endpoint();
  const { sink: s, count } = sink({ url: target.url });
  s.emit("dev.snooze.replica.woke", "qwen", { model: "qwen", to: "ready" }, { traceparent });
  await s.drain();
  expect(target.received).toHaveLength(1);
  const r = target.received[0]!;
  expect(r.headers["content-type"]).toBe("application/json");
  expect(r.headers["ce-specversion"]).toBe("1.0");
  expect(r.headers["ce-type"]).toBe("dev.snooze.replica.woke");
  expect(r.headers["ce-source"]).toBe("/test");
  expect(r.headers["ce-subject"]).toBe("qwen");
  expect(r.headers["ce-id"]).toMatch(/^[0-9a-f-]{36}$/);
  expect(r.headers["ce-traceparent"]).toBe(traceparent);
  expect(JSON.parse(r.body)).toEqual({ model: "qwen", to: "ready" });
  const event = asEvent(r);
  expect(event).toMatchObject({ type: "dev.snooze.replica.woke", subject: "qwen", traceparent });
  expect(event.data).toEqual({ model: "qwen", to: "ready" });
  expect(await count("delivered")).toBe(1);
});

test("structured mode on request: one application/cloudevents+json document", async () => {
  const target = await endpoint();
  const { sink: s } = sink({ url: target.url, mode: "structured" });
  s.emit("dev.snooze.replica.slept", "qwen", { level: 1 });
  await s.drain();
  const r = target.received[0]!;
  expect(r.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
  expect(r.headers["ce-type"]).toBeUndefined();
  const document = JSON.parse(r.body);
  expect(document).toMatchObject({
    specversion: "1.0",
    type: "dev.snooze.replica.slept",
    source: "/test",
    subject: "qwen",
    datacontenttype: "application/json",
    data: { level: 1 },
  });
  expect(document.traceparent).toBeUndefined();
  expect(asEvent(r).data).toEqual({ level: 1 });
});

test.each([500, 503, 404, 408, 409, 429])("a %i is retried with back-off until delivered", async (status) => {
  const target = await endpoint((res, n) => res.writeHead(n < 3 ? status : 200).end());
  const { sink: s, count } = sink({ url: target.url });
  s.emit("dev.snooze.replica.started", "qwen", {});
  await s.drain();
  expect(target.received).toHaveLength(3);
  // Every attempt is the same event.
  expect(new Set(target.received.map((r) => r.headers["ce-id"])).size).toBe(1);
  expect(await count("delivered")).toBe(1);
});

test("a 400 is final: no retry, counted as failed", async () => {
  const target = await endpoint((res) => res.writeHead(400).end("no"));
  const { sink: s, count } = sink({ url: target.url });
  s.emit("dev.snooze.replica.started", "qwen", {});
  await s.drain();
  expect(target.received).toHaveLength(1);
  expect(await count("failed")).toBe(1);
});

test("the log names the sink without the credentials its URL holds (found by an outside tester)", async () => {
  const target = await endpoint((res) => res.writeHead(400).end("no"));
  const lines: string[] = [];
  const url = `${target.url.replace("http://", "http://user:s3cretPW@")}x?token=QTOKEN`;
  const { sink: s } = sink({ url, log: createLogger({}, (line) => void lines.push(line), "debug") });
  s.emit("dev.snooze.replica.started", "qwen", {});
  await s.drain();
  expect(lines.join("")).toContain("CloudEvent not delivered");
  expect(lines.join("")).toContain("user:redacted@127.0.0.1");
  expect(lines.join("")).not.toMatch(/s3cretPW|QTOKEN/);
  // The sink itself gets them: the password as Basic authentication, the query as written (found
  // by an outside tester: the user and password were dropped).
  expect(target.received[0]!.headers.authorization).toBe(
    `Basic ${Buffer.from("user:s3cretPW").toString("base64")}`,
  );
});

describe("a sink that redirects (found by a probe: a 307 was a failed delivery)", () => {
  test("a 307 or 308 is followed with the same POST, as Knative's delivery follows it; the URL's credentials go to its own origin only", async () => {
    const elsewhere = await endpoint();
    const target = await endpoint((res, n) => {
      if (n === 1) res.writeHead(307, { location: "/moved?to=here" }).end();
      else if (n === 2) res.writeHead(308, { location: elsewhere.url }).end();
      else res.writeHead(202).end();
    });
    const url = target.url.replace("http://", "http://user:pw@");
    const { sink: s, count } = sink({ url });
    s.emit("dev.snooze.replica.woke", "qwen", { model: "qwen" });
    await s.drain();
    expect(await count("delivered")).toBe(1);
    expect(target.received.map((r) => r.path)).toEqual(["/", "/moved?to=here"]);
    expect(elsewhere.received).toHaveLength(1);
    const [first, second] = target.received;
    const last = elsewhere.received[0]!;
    for (const r of [second!, last]) {
      expect(r.body).toBe(first!.body);
      expect(r.headers["ce-id"]).toBe(first!.headers["ce-id"]);
    }
    expect(second!.headers.authorization).toBe(first!.headers.authorization);
    expect(first!.headers.authorization).toMatch(/^Basic /);
    expect(last.headers.authorization).toBeUndefined();
    expect(asEvent(last).subject).toBe("qwen");
  });

  test("a 301, 302 or 303 (a POST turned into a GET) is final, the log saying where it points; a redirect loop ends", async () => {
    const lines: string[] = [];
    const log = createLogger({}, (line) => void lines.push(line), "debug");
    const moved = await endpoint((res) =>
      res.writeHead(302, { location: "https://example.invalid/in" }).end(),
    );
    const loop = await endpoint((res) => res.writeHead(307, { location: "/" }).end());
    const { sink: one, count: countOne } = sink({ url: moved.url, log });
    const { sink: two, count: countTwo } = sink({ url: loop.url, log });
    one.emit("dev.snooze.replica.woke", "qwen", {});
    two.emit("dev.snooze.replica.woke", "qwen", {});
    await Promise.all([one.drain(), two.drain()]);
    expect(moved.received).toHaveLength(1);
    expect(loop.received).toHaveLength(11);
    expect([await countOne("failed"), await countTwo("failed")]).toEqual([1, 1]);
    const reasons = lines.map((line) => JSON.parse(line).reason as string);
    expect(reasons).toContain(
      "the sink answered 302, a redirect to https://example.invalid/in that would drop the event (only a 307 or 308 keeps a POST's body): set the sink to where it points",
    );
    expect(reasons).toContain(`the sink answered 307 after 10 redirects (to ${loop.url})`);
  });
});

test("retries stop after the configured number, with the waits doubling", async () => {
  const times: number[] = [];
  const target = await endpoint((res) => {
    times.push(performance.now());
    res.writeHead(500).end();
  });
  const { sink: s, count } = sink({ url: target.url, retries: 3, backoffMs: 40 });
  s.emit("dev.snooze.replica.started", "qwen", {});
  await s.drain();
  expect(target.received).toHaveLength(4);
  const gaps = times.slice(1).map((t, i) => t - times[i]!);
  expect(gaps[0]).toBeGreaterThanOrEqual(35);
  expect(gaps[1]).toBeGreaterThanOrEqual(75);
  expect(gaps[2]).toBeGreaterThanOrEqual(155);
  expect(await count("failed")).toBe(1);
});

test("a transport error (nothing listening) is retried, then counted as failed", async () => {
  const target = await endpoint();
  servers[0]!.close();
  await once(servers[0]!, "close");
  const { sink: s, count } = sink({ url: target.url, retries: 2 });
  s.emit("dev.snooze.replica.started", "qwen", {});
  await s.drain();
  expect(await count("failed")).toBe(1);
});

test("a sink that hangs: each attempt times out, and emit never waits for it", async () => {
  const target = await endpoint(() => {});
  const { sink: s, count } = sink({ url: target.url, timeoutMs: 100, retries: 1 });
  const started = performance.now();
  for (let i = 0; i < 10; i++) s.emit("dev.snooze.replica.started", "qwen", { i });
  expect(performance.now() - started).toBeLessThan(50);
  await s.drain(5_000);
  expect(await count("failed")).toBe(10);
  expect(target.received.length).toBe(20);
});

test("the queue is bounded: past it events are dropped and counted", async () => {
  const target = await endpoint(() => {});
  const { sink: s, count } = sink({ url: target.url, timeoutMs: 5_000, maxQueued: 5, concurrency: 2 });
  for (let i = 0; i < 8; i++) s.emit("dev.snooze.replica.started", "qwen", { i });
  expect(s.pending).toBe(5);
  expect(await count("dropped")).toBe(3);
});

test("a full queue is said in the log, once as it fills and once, with the count by type, when an event fits again (found by an outside tester: the drops were at debug level only, so a sink that fell behind lost events without a line)", async () => {
  // Answers nothing until told: the first two events hold both slots of the queue.
  const held: ServerResponse[] = [];
  let holding = true;
  const target = await endpoint((res) => (holding ? void held.push(res) : res.writeHead(202).end()));
  const lines: string[] = [];
  const { sink: s, count } = sink({
    url: target.url,
    log: createLogger({}, (line) => void lines.push(line), "info"),
    maxQueued: 2,
    concurrency: 2,
  });
  const warnings = () => lines.map((line) => JSON.parse(line)).filter((l) => l.level === "warn");
  s.emit("dev.snooze.replica.started", "a", {});
  s.emit("dev.snooze.replica.started", "b", {});
  for (let i = 0; i < 3; i++) s.emit("dev.snooze.replica.stopped", "c", { i });
  s.emit("dev.snooze.replica.slept", "d", {});
  expect(await count("dropped")).toBe(4);
  // One line as the queue fills, not one per event.
  expect(warnings()).toHaveLength(1);
  expect(warnings()[0]).toMatchObject({
    msg: "CloudEvents are dropped: the sink's queue is full",
    maxQueued: 2,
  });
  for (let i = 0; i < 200 && held.length < 2; i++) await new Promise((resolve) => setTimeout(resolve, 10));
  holding = false;
  for (const res of held.splice(0)) res.writeHead(202).end();
  await s.drain(5_000);
  s.emit("dev.snooze.replica.woke", "e", {});
  await s.drain(5_000);
  expect(warnings()).toHaveLength(2);
  expect(warnings()[1]).toMatchObject({
    msg: "4 CloudEvents were dropped while the sink's queue was full",
    types: { "dev.snooze.replica.stopped": 3, "dev.snooze.replica.slept": 1 },
  });
  expect(await count("delivered")).toBe(3);
});

test("each event carries the sequence extension: after an outage's retries brought them out of order, it puts them back; a dropped one leaves a gap", async () => {
  // Found by an outside tester: events queued while the sink was down arrived out of order, with
  // nothing to tell their order by (`time` has millisecond steps, and ties).
  const target = await endpoint((res, n) => res.writeHead(n === 1 ? 503 : 202).end());
  const { sink: s } = sink({ url: target.url, maxQueued: 3, concurrency: 2, backoffMs: 300 });
  for (let i = 0; i < 4; i++) s.emit("dev.snooze.replica.started", "qwen", { i });
  await s.drain();
  // The first request was answered 503; the others were delivered, in this order.
  const delivered = target.received.slice(1).map(asEvent);
  // The first attempt of event 0 was refused and retried after event 1 and 2 got through.
  expect(delivered.map((e) => (e.data as { i: number }).i)).toEqual([1, 2, 0]);
  const sequences = delivered.map((e) => e.sequence as string);
  const inOrder = delivered
    .slice()
    .sort((a, b) => ((a.sequence as string) < (b.sequence as string) ? -1 : 1))
    .map((e) => (e.data as { i: number }).i);
  expect(inOrder).toEqual([0, 1, 2]);
  // The fourth did not fit the queue: its number is missing after the third's.
  const counts = sequences.map((q) => Number(q.split("-")[1])).sort((a, b) => a - b);
  expect(counts).toEqual([1, 2, 3]);
  s.emit("dev.snooze.replica.started", "qwen", { i: 4 });
  await s.drain();
  expect(Number((asEvent(target.received.at(-1)!).sequence as string).split("-")[1])).toBe(5);
  // A later process with the same source sorts after this one.
  const { sink: next } = sink({ url: target.url });
  await new Promise((resolve) => setTimeout(resolve, 2));
  next.emit("dev.snooze.replica.started", "qwen", { i: 0 });
  await next.drain();
  expect((asEvent(target.received.at(-1)!).sequence as string) > sequences[0]!).toBe(true);
});

test("an event the SDK refuses is counted as invalid, not sent", async () => {
  const target = await endpoint();
  const { sink: s, count } = sink({
    url: target.url,
    extensions: { "Bad-Name": "x" } as Record<string, string>,
  });
  s.emit("dev.snooze.replica.started", "qwen", {});
  await s.drain();
  expect(target.received).toHaveLength(0);
  expect(await count("invalid")).toBe(1);
});

test("the sink comes from the configuration, else K_SINK; K_CE_OVERRIDES adds extensions", async () => {
  const target = await endpoint();
  const before = { sink: process.env.K_SINK, overrides: process.env.K_CE_OVERRIDES };
  try {
    delete process.env.K_SINK;
    expect(createEventSink({ source: "/s", log: silentLogger, registry: new Registry() })).toBeUndefined();
    process.env.K_SINK = target.url;
    process.env.K_CE_OVERRIDES = JSON.stringify({ extensions: { cluster: "east", "Not-Valid": "x" } });
    const fromEnv = createEventSink({ source: "/s", log: silentLogger, registry: new Registry() })!;
    sinks.push(fromEnv);
    expect(fromEnv.url).toBe(target.url);
    fromEnv.emit("dev.snooze.replica.started", "qwen", {});
    await fromEnv.drain();
    expect(target.received[0]!.headers["ce-cluster"]).toBe("east");
    const configured = createEventSink({
      configured: "http://127.0.0.1:1/",
      source: "/s",
      log: silentLogger,
      registry: new Registry(),
    })!;
    sinks.push(configured);
    expect(configured.url).toBe("http://127.0.0.1:1/");
  } finally {
    if (before.sink === undefined) delete process.env.K_SINK;
    else process.env.K_SINK = before.sink;
    if (before.overrides === undefined) delete process.env.K_CE_OVERRIDES;
    else process.env.K_CE_OVERRIDES = before.overrides;
  }
  expect(ceOverrides("not json")).toEqual({});
});

test("a K_SINK that is no http(s) URL is said once at start, and no sink made, rather than every event failing its five attempts (found by a probe)", () => {
  const before = process.env.K_SINK;
  try {
    for (const [value, reason] of [
      ["localhost:9000", "does not start with http:// or https://"],
      ["ftp://127.0.0.1/", "does not start with http:// or https://"],
      ["http://a b/", "it is not a URL"],
      // Found by an outside tester: taken, and every event failed its five attempts with
      // "URIError: URI malformed", the sink never asked.
      ["http://user:p%ss@127.0.0.1:9/", "its password has a % that is no percent-escape"],
    ]) {
      process.env.K_SINK = value;
      const lines: string[] = [];
      const log = createLogger({}, (line) => void lines.push(line), "debug");
      expect(createEventSink({ source: "/s", log, registry: new Registry() })).toBeUndefined();
      expect(lines).toHaveLength(1);
      expect(JSON.parse(lines[0]!)).toMatchObject({
        level: "warn",
        msg: "K_SINK is not used: no CloudEvents are sent",
        sink: redactUrl(value!),
        reason: expect.stringContaining(reason!),
      });
    }
  } finally {
    if (before === undefined) delete process.env.K_SINK;
    else process.env.K_SINK = before;
  }
});

test("the source names this process as it was named (--identity, the host name), percent-encoded: a space no longer makes every event invalid (found by a probe)", async () => {
  const target = await endpoint();
  const source = eventSourceOf("snooze", "autoscaler", "gpu box/1 ü");
  expect(source).toBe("/snooze/autoscaler/gpu%20box%2F1%20%C3%BC");
  expect(eventSourceOf("snooze", "gpu-box.local")).toBe("/snooze/gpu-box.local");
  for (const mode of ["binary", "structured"] as const) {
    const { sink: s, count } = sink({ url: target.url, source, mode });
    s.emit("dev.snooze.replica.woke", "qwen", {});
    await s.drain();
    expect(await count("delivered")).toBe(1);
  }
  // Binary mode percent-encodes the header once more, as the binding says (the JavaScript SDK does
  // not decode it: the Python and Go SDKs do).
  const [binary, structured] = target.received;
  expect(decodeHeaderValue(String(binary!.headers["ce-source"]))).toBe(source);
  expect(asEvent(structured!).source).toBe(source);
});

test("what Knative retries", () => {
  expect([500, 502, 503, 504, 404, 408, 409, 429].every(isRetryableStatus)).toBe(true);
  expect([400, 401, 403, 413, 415, 422].some(isRetryableStatus)).toBe(false);
});

test("close: events still queued, waiting for a retry or in flight are told of in one warning, by type and why, not one line each with the HTTP client's words (found by an outside tester)", async () => {
  // A sink that accepts the connection and never answers, except the first attempt: a 503 (a retry waits).
  const target = await endpoint((res, n) => {
    if (n === 1) res.writeHead(503).end();
  });
  const lines: string[] = [];
  const { sink: s, count } = sink({
    url: target.url,
    log: createLogger({}, (line) => void lines.push(line), "debug"),
    maxQueued: 6,
    concurrency: 2,
    backoffMs: 60_000,
  });
  s.emit("dev.snooze.replica.woke", "a", {});
  for (let i = 0; i < 5; i++) s.emit("dev.snooze.replica.stopped", "b", { i });
  s.emit("dev.snooze.replica.stopped", "c", {}); // past the queue: dropped at once, as before
  // The first attempt was refused (its retry waits a minute); two more are in flight.
  const arrived = () => target.received.length >= 3;
  for (let i = 0; i < 200 && !arrived(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  expect(arrived()).toBe(true);
  await s.close("the shutdown's time ran out");
  const warnings = lines.map((line) => JSON.parse(line)).filter((l) => l.level === "warn");
  // The one past the queue is said as the queue fills and counted at the close, apart from the lost.
  expect(warnings.map((w) => w.msg)).toEqual([
    "CloudEvents are dropped: the sink's queue is full",
    "1 CloudEvent was dropped while the sink's queue was full",
    "6 CloudEvents were not delivered and are lost",
  ]);
  expect(warnings[2]).toMatchObject({
    msg: "6 CloudEvents were not delivered and are lost",
    reason: "the shutdown's time ran out",
    types: { "dev.snooze.replica.woke": 1, "dev.snooze.replica.stopped": 5 },
    inFlight: 2,
    waitingForRetry: 1,
    queued: 3,
  });
  expect(lines.join("")).not.toMatch(/ClientDestroyed|destroyed/);
  expect(await count("dropped")).toBe(7);
  expect(await count("failed")).toBe(0);
  // A second close has nothing more to say.
  await s.close();
  expect(lines.filter((line) => line.includes('"level":"warn"'))).toHaveLength(3);
});

test("the sequence belongs to the process's source: a sink built anew (a reload's new eventSink or eventMode) continues it (found by an outside tester)", async () => {
  const target = await endpoint();
  const build = (mode: "binary" | "structured") => {
    const created = createEventSink({
      configured: target.url,
      mode,
      source: "/sequence-test",
      log: silentLogger,
      registry: new Registry(),
    })!;
    sinks.push(created);
    return created;
  };
  const first = build("binary");
  first.emit("dev.snooze.replica.started", "qwen", {});
  first.emit("dev.snooze.replica.slept", "qwen", {});
  await first.drain();
  const second = build("structured");
  second.emit("dev.snooze.replica.woke", "qwen", {});
  await second.drain();
  const sequences = target.received.map((r) => asEvent(r).sequence as string).sort();
  // The prefix is when the process started, as events.md says; the count goes on.
  const epoch = String(Math.floor(performance.timeOrigin)).padStart(13, "0");
  expect(sequences).toEqual([1, 2, 3].map((n) => `${epoch}-${String(n).padStart(10, "0")}`));
});

test("K_CE_OVERRIDES as Knative means it: one warning at start names each entry not used and why; an override never replaces Snooze's own attributes (found by an outside tester)", async () => {
  const target = await endpoint();
  const before = process.env.K_CE_OVERRIDES;
  const lines: string[] = [];
  const log = createLogger({}, (line) => void lines.push(line), "debug");
  try {
    process.env.K_CE_OVERRIDES = JSON.stringify({
      extensions: {
        team: "ml",
        "Bad-Key": "x",
        num: 5,
        traceparent: "00-11111111111111111111111111111111-2222222222222222-01",
        sequence: "9",
      },
      type: "x",
    });
    const build = () => {
      const created = createEventSink({
        configured: target.url,
        source: "/o",
        log,
        registry: new Registry(),
      })!;
      sinks.push(created);
      return created;
    };
    const first = build();
    // A reload's new sink reads it again, and says nothing more.
    const second = build();
    const warnings = lines.map((line) => JSON.parse(line)).filter((l) => l.level === "warn");
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatchObject({
      msg: "K_CE_OVERRIDES: entries not used",
      used: ["team"],
      ignored: [
        `type: only "extensions" is read (Knative's K_CE_OVERRIDES), and type is an attribute Snooze or the CloudEvents spec defines`,
        "extensions.Bad-Key: not a CloudEvents attribute name (lowercase a-z and 0-9, at most 20 characters)",
        "extensions.num: the value must be a string, not 5",
        "extensions.traceparent: an attribute Snooze or the CloudEvents spec defines, which an override never replaces",
        "extensions.sequence: an attribute Snooze or the CloudEvents spec defines, which an override never replaces",
      ],
    });
    const traceparent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01";
    first.emit("dev.snooze.replica.started", "qwen", {}, { traceparent });
    await first.drain();
    second.emit("dev.snooze.replica.stopped", "qwen", {});
    await second.drain();
    const [started, stopped] = target.received.map(asEvent);
    expect(started).toMatchObject({ type: "dev.snooze.replica.started", team: "ml", traceparent });
    expect(stopped!.type).toBe("dev.snooze.replica.stopped");
    expect(stopped!.traceparent).toBeUndefined();
    expect(String(stopped!.sequence)).toMatch(/^\d{13}-\d{10}$/);
  } finally {
    if (before === undefined) delete process.env.K_CE_OVERRIDES;
    else process.env.K_CE_OVERRIDES = before;
  }
  expect(ceOverrides('{"extensions":{"a":"b"},"x":1}', log)).toEqual({ a: "b" });
  expect(ceOverrides("[1]")).toEqual({});
});
