import { context, propagation, SpanKind, SpanStatusCode, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { type LocalSnooze, startLocalSnooze } from "../../cli/local-snooze.ts";
import { createLogger, silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { chat, metricValue, sharedGpu, simCommand, startWith, until } from "../helpers/local-snooze.ts";

const exporter = new InMemorySpanExporter();
let snooze: LocalSnooze;
beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // What the SDK registers by default (OTEL_PROPAGATORS=tracecontext,baggage).
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
  snooze = await startWith(`
models:
  qwen:
    command: ${simCommand(["--enable-sleep-mode"])}
`);
});
afterAll(() => snooze.close(1_000));

test("a cold start is one activation span with start and warm-up children; held requests link to it", async () => {
  const responses = await Promise.all(
    [1, 2, 3].map(() => fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))),
  );
  expect(responses.map((r) => r.status)).toEqual([200, 200, 200]);
  await until(
    () => exporter.getFinishedSpans().filter((s) => s.name.startsWith("POST ")).length === 3,
    2_000,
    "server spans",
  );
  const spans = exporter.getFinishedSpans();
  const activations = spans.filter((s) => s.name === "snooze.activation");
  expect(activations).toHaveLength(1);
  const activation = activations[0]!;
  expect(activation.attributes).toMatchObject({
    "snooze.model": "qwen",
    "snooze.from_tier": "cold",
    "snooze.activation": "start",
  });
  const children = spans
    .filter((s) => s.parentSpanContext?.spanId === activation.spanContext().spanId)
    .map((s) => s.name);
  expect(children.sort()).toEqual(["snooze.start", "snooze.warmup"]);

  const holds = spans.filter((s) => s.name === "snooze.hold");
  expect(holds).toHaveLength(3);
  for (const hold of holds) {
    expect(hold.links.map((l) => l.context.spanId)).toEqual([activation.spanContext().spanId]);
    expect(hold.attributes["snooze.hold.outcome"]).toBe("dispatched");
  }
  const servers = spans.filter((s) => s.name === "POST /v1/chat/completions");
  for (const server of servers) {
    expect(server.attributes).toMatchObject({
      "http.response.status_code": 200,
      "gen_ai.request.model": "qwen",
    });
    // Each hold span is a child of its request's server span.
    expect(holds.some((h) => h.parentSpanContext?.spanId === server.spanContext().spanId)).toBe(true);
  }
});

test("a swap is one snooze.swap span: drain and sleep of the incumbent, then the target's wake; held requests link to it", async () => {
  const gpu = sharedGpu();
  const slotted = await startWith(`
slots:
  gpu0: { minResidency: 0s, swapCooldown: 0s }
models:
  a: { slot: gpu0, command: ${simCommand(gpu)} }
  b: { slot: gpu0, command: ${simCommand(gpu)} }
`);
  try {
    for (const model of ["a", "b", "a"])
      expect((await fetch(`${slotted.url}/v1/chat/completions`, chat(model))).status).toBe(200);
    const spans = exporter.getFinishedSpans();
    const swap = spans.find(
      (s) =>
        s.name === "snooze.swap" &&
        s.attributes["snooze.swap.to"] === "a" &&
        s.attributes["snooze.swap.from"] === "b",
    )!;
    expect(swap).toBeDefined();
    const childrenOf = (id: string) => spans.filter((s) => s.parentSpanContext?.spanId === id);
    const children = childrenOf(swap.spanContext().spanId);
    expect(children.map((s) => s.name).sort()).toEqual(["snooze.activation", "snooze.drain", "snooze.sleep"]);
    const activation = children.find((s) => s.name === "snooze.activation")!;
    expect(childrenOf(activation.spanContext().spanId).map((s) => s.name)).toContain("snooze.wake");
    const holds = spans.filter((s) => s.name === "snooze.hold" && s.attributes["snooze.model"] === "a");
    expect(holds.at(-1)!.links.map((l) => l.context.spanId)).toEqual([
      swap.spanContext().spanId,
      activation.spanContext().spanId,
    ]);
  } finally {
    await slotted.close(1_000);
  }
});

test("the caller's trace continues: its traceparent parents the server span; the engine call is a CLIENT span with HTTP and GenAI attributes and usage", async () => {
  const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4736";
  const callerSpan = "00f067aa0ba902b7";
  const traced = (extra: Record<string, unknown>) => {
    const init = chat("qwen", extra);
    return {
      ...init,
      headers: {
        ...init.headers,
        traceparent: `00-${callerTrace}-${callerSpan}-01`,
        host: "snooze.test:8080",
      },
    };
  };
  const plain = await fetch(`${snooze.url}/v1/chat/completions?x=1`, traced({}));
  expect(plain.status).toBe(200);
  const streamed = await fetch(
    `${snooze.url}/v1/chat/completions`,
    traced({ stream: true, stream_options: { include_usage: true } }),
  );
  expect(streamed.status).toBe(200);
  await streamed.text();
  await until(
    () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === callerTrace).length >= 4,
    2_000,
    "the caller's spans",
  );
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === callerTrace);
  const servers = spans.filter((s) => s.kind === SpanKind.SERVER);
  expect(servers).toHaveLength(2);
  for (const server of servers) {
    expect(server.name).toBe("POST /v1/chat/completions");
    expect(server.parentSpanContext?.spanId).toBe(callerSpan);
    expect(server.attributes).toMatchObject({
      "http.request.method": "POST",
      "http.route": "/v1/chat/completions",
      "url.path": "/v1/chat/completions",
      "server.address": "127.0.0.1",
      "server.port": Number(new URL(snooze.url).port),
      "http.response.status_code": 200,
      "gen_ai.operation.name": "chat",
      "gen_ai.request.model": "qwen",
    });
    const clients = spans.filter((s) => s.parentSpanContext?.spanId === server.spanContext().spanId);
    expect(clients.map((c) => [c.name, c.kind])).toEqual([["chat qwen", SpanKind.CLIENT]]);
    expect(clients[0]!.attributes).toMatchObject({
      "http.request.method": "POST",
      "server.address": "127.0.0.1",
      "http.response.status_code": 200,
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "vllm",
      "gen_ai.request.model": "qwen",
      "snooze.model": "qwen",
      "gen_ai.usage.output_tokens": 5,
    });
    expect(clients[0]!.attributes["gen_ai.usage.input_tokens"]).toBeGreaterThan(0);
    expect(server.attributes["gen_ai.usage.output_tokens"]).toBe(5);
  }
});

test("the model list Snooze answers itself continues the caller's trace too: GET /v1/models and /v1/models/{model} have SERVER spans, refusals too (found by an outside tester: they had none)", async () => {
  const traceId = "5bf92f3577b34da6a3ce929d0e0e4736";
  const headers = { traceparent: `00-${traceId}-00f067aa0ba902b7-01` };
  for (const [path, status] of [
    ["/v1/models", 200],
    ["/v1/models/qwen", 200],
    ["/v1/models/nope", 404],
    ["/v1/models/", 400],
  ] as const)
    expect((await fetch(`${snooze.url}${path}`, { headers })).status).toBe(status);
  expect((await fetch(`${snooze.url}/v1/models`, { method: "PUT", headers })).status).toBe(405);
  const servers = () =>
    exporter
      .getFinishedSpans()
      .filter((s) => s.spanContext().traceId === traceId && s.kind === SpanKind.SERVER);
  await until(() => servers().length === 5, 2_000, "server spans");
  expect(
    servers().map((s) => [
      s.name,
      s.attributes["http.route"],
      s.attributes["url.path"],
      s.attributes["http.response.status_code"],
    ]),
  ).toEqual([
    ["GET /v1/models", "/v1/models", "/v1/models", 200],
    ["GET /v1/models/{model}", "/v1/models/{model}", "/v1/models/qwen", 200],
    ["GET /v1/models/{model}", "/v1/models/{model}", "/v1/models/nope", 404],
    ["GET /v1/models/{model}", "/v1/models/{model}", "/v1/models/", 400],
    ["PUT /v1/models", "/v1/models", "/v1/models", 405],
  ]);
  for (const span of servers()) expect(span.parentSpanContext?.spanId).toBe("00f067aa0ba902b7");
});

test("a method OpenTelemetry's HTTP conventions do not know is _OTHER in the span, its name HTTP, the method as sent in http.request.method_original", async () => {
  // Found by an outside tester: PROPFIND, PURGE, M-SEARCH (any method Node's parser takes) named
  // the span and were its http.request.method.
  const traceId = "5bf92f3577b34da6a3ce929d0e0e4740";
  const headers = { traceparent: `00-${traceId}-00f067aa0ba902b7-01` };
  for (const [method, path] of [
    ["PROPFIND", "/v1/chat/completions"],
    ["PURGE", "/v1/models"],
    ["M-SEARCH", "/v1/nowhere"],
  ] as const)
    expect((await fetch(`${snooze.url}${path}`, { method, headers })).status).toBeGreaterThanOrEqual(400);
  const servers = () =>
    exporter
      .getFinishedSpans()
      .filter((s) => s.spanContext().traceId === traceId && s.kind === SpanKind.SERVER);
  await until(() => servers().length === 3, 2_000, "server spans");
  expect(
    servers().map((s) => [
      s.name,
      s.attributes["http.request.method"],
      s.attributes["http.request.method_original"],
    ]),
  ).toEqual([
    ["HTTP /v1/chat/completions", "_OTHER", "PROPFIND"],
    ["HTTP /v1/models", "_OTHER", "PURGE"],
    ["HTTP /v1/*", "_OTHER", "M-SEARCH"],
  ]);
});

test("a stream whose client leaves after its 200: the server span says 200 was sent, and that it ended early", async () => {
  // Found by an outside tester: the span said 499, though a 200 had gone out.
  const callerTrace = "5bf92f3577b34da6a3ce929d0e0e4737";
  const leave = new AbortController();
  const init = chat("qwen", { stream: true, max_tokens: 400, ignore_eos: true });
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    ...init,
    headers: { ...init.headers, traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` },
    signal: leave.signal,
  });
  expect(response.status).toBe(200);
  await response.body!.getReader().read();
  leave.abort();
  await until(
    () =>
      exporter
        .getFinishedSpans()
        .some((s) => s.spanContext().traceId === callerTrace && s.kind === SpanKind.SERVER),
    5_000,
    "the server span",
  );
  const server = exporter
    .getFinishedSpans()
    .find((s) => s.spanContext().traceId === callerTrace && s.kind === SpanKind.SERVER)!;
  expect(server.attributes).toMatchObject({
    "http.response.status_code": 200,
    "error.type": "client_closed",
  });
});

test("a 503 hold_budget_exceeded: the server span has an error status and names it in error.type", async () => {
  // Found by an outside tester: the 5xx had an error status but no `error.type`, which the HTTP
  // conventions require for it.
  const callerTrace = "7bf92f3577b34da6a3ce929d0e0e4739";
  const slow = await startWith(`
models:
  tardy:
    holdBudget: 300ms
    command: ${simCommand(["--load-time", "3s"], 1)}
`);
  try {
    const init = chat("tardy");
    const response = await fetch(`${slow.url}/v1/chat/completions`, {
      ...init,
      headers: { ...init.headers, traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` },
    });
    expect(response.status).toBe(503);
    await response.text();
    await until(
      () =>
        exporter
          .getFinishedSpans()
          .some((s) => s.spanContext().traceId === callerTrace && s.kind === SpanKind.SERVER),
      2_000,
      "the server span",
    );
    const server = exporter
      .getFinishedSpans()
      .find((s) => s.spanContext().traceId === callerTrace && s.kind === SpanKind.SERVER)!;
    expect(server.status.code).toBe(SpanStatusCode.ERROR);
    expect(server.attributes).toMatchObject({
      "http.response.status_code": 503,
      "error.type": "hold_budget_exceeded",
    });
  } finally {
    await slow.close(1_000);
  }
});

describe("a request held for a model slow to start", () => {
  const lines: Record<string, unknown>[] = [];
  let slow: LocalSnooze;
  beforeAll(async () => {
    slow = await startWith(
      `
models:
  tardy:
    holdBudget: 300ms
    command: ${simCommand(["--load-time", "3s"], 1)}
`,
      createLogger({}, (line) => void lines.push(JSON.parse(line)), "info"),
    );
  });
  afterAll(() => slow.close(1_000));
  const traced = (trace: string, signal?: AbortSignal) => {
    const init = chat("tardy");
    return { ...init, signal, headers: { ...init.headers, traceparent: `00-${trace}-00f067aa0ba902b7-01` } };
  };
  const spansOf = async (trace: string) => {
    const done = () =>
      exporter
        .getFinishedSpans()
        .some((s) => s.spanContext().traceId === trace && s.kind === SpanKind.SERVER);
    await until(done, 2_000, "the server span");
    return exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === trace);
  };

  test("its hold budget spent: a warning in the log with the request's trace ids, the model, how long it waited and its tier (found by an outside tester: nothing was logged)", async () => {
    const callerTrace = "7bf92f3577b34da6a3ce929d0e0e4740";
    expect((await fetch(`${slow.url}/v1/chat/completions`, traced(callerTrace))).status).toBe(503);
    const server = (await spansOf(callerTrace)).find((s) => s.kind === SpanKind.SERVER)!;
    const line = lines.find((l) => l.msg === "hold budget spent");
    expect(line).toMatchObject({
      level: "warn",
      model: "tardy",
      code: "hold_budget_exceeded",
      tier: "starting",
      trace_id: callerTrace,
      span_id: server.spanContext().spanId,
    });
    expect(line!.heldMs).toBeGreaterThanOrEqual(300);
  });

  test("its client leaves while it is held: the hold says abandoned, with no error status, as its server span (found by an outside tester: the hold was the trace's one error)", async () => {
    const callerTrace = "7bf92f3577b34da6a3ce929d0e0e4741";
    const leave = new AbortController();
    const asked = fetch(`${slow.url}/v1/chat/completions`, traced(callerTrace, leave.signal)).catch((e) => e);
    const held = async () =>
      metricValue(await (await fetch(`${slow.url}/metrics`)).text(), "snooze_held_requests", {
        model: "tardy",
      }) > 0;
    await until(held, 2_000, "the request held");
    leave.abort();
    expect(await asked).toBeInstanceOf(Error);
    const spans = await spansOf(callerTrace);
    const hold = spans.find((s) => s.name === "snooze.hold")!;
    expect(hold.attributes["snooze.hold.outcome"]).toBe("abandoned");
    expect(hold.status.code).toBe(SpanStatusCode.UNSET);
    expect(spans.find((s) => s.kind === SpanKind.SERVER)!.status.code).toBe(SpanStatusCode.UNSET);
    expect(lines.filter((l) => l.trace_id === callerTrace && l.level !== "info")).toEqual([]);
  });
});

test("a wake asked through the admin API or by an event says so in the log, with the call's trace ids; the event's line joins its own trace (found by an outside tester: the log showed a start out of nowhere)", async () => {
  const lines: Record<string, unknown>[] = [];
  const asked = await startWith(
    `models:\n  woken:\n    command: ${simCommand(["--load-time", "3s"], 1)}\n`,
    createLogger({}, (line) => void lines.push(JSON.parse(line)), "info"),
  );
  try {
    const adminTrace = "7bf92f3577b34da6a3ce929d0e0e4743";
    const wake = await fetch(`${asked.url}/snooze/v1/models/woken/wake`, {
      method: "POST",
      headers: { traceparent: `00-${adminTrace}-00f067aa0ba902b7-01` },
    });
    expect(wake.status).toBe(202);
    const deliveryTrace = "7bf92f3577b34da6a3ce929d0e0e4744";
    const eventParent = "00-7bf92f3577b34da6a3ce929d0e0e4745-00f067aa0ba902b8-01";
    const event = await fetch(`${asked.url}/snooze/v1/events`, {
      method: "POST",
      headers: {
        "ce-specversion": "1.0",
        "ce-type": "dev.snooze.model.wake",
        "ce-source": "/cron/morning",
        "ce-id": "e-1",
        "ce-subject": "woken",
        "ce-traceparent": eventParent,
        traceparent: `00-${deliveryTrace}-00f067aa0ba902b7-01`,
      },
    });
    expect(event.status).toBe(202);
    expect(lines.find((l) => l.msg === "asked through the admin API")).toMatchObject({
      level: "info",
      model: "woken",
      action: "wake",
      trace_id: adminTrace,
    });
    expect(lines.find((l) => l.msg === "asked by an event")).toMatchObject({
      level: "info",
      model: "woken",
      action: "wake",
      source: "/cron/morning",
      id: "e-1",
      traceparent: eventParent,
      trace_id: deliveryTrace,
    });
  } finally {
    await asked.close(1_000);
  }
});

test("a fault in the activator is logged with its request's trace ids (found by an outside tester: the error line, written after the request's context was left, had none)", async () => {
  const lines: Record<string, unknown>[] = [];
  const faulty = await startWith(
    `models:\n  qwen:\n    command: ${simCommand()}\n`,
    createLogger({}, (line) => void lines.push(JSON.parse(line)), "error"),
  );
  try {
    const routes = faulty.activator.routes;
    // Only the request's own lookup fails: the stats ticker and the shutdown read the routes too.
    const get = routes.get.bind(routes);
    routes.get = () => {
      routes.get = get;
      throw new Error("boom");
    };
    const callerTrace = "7bf92f3577b34da6a3ce929d0e0e4746";
    const init = chat("qwen");
    const answer = await fetch(`${faulty.url}/v1/chat/completions`, {
      ...init,
      headers: { ...init.headers, traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` },
    });
    expect(answer.status).toBe(500);
    expect(lines.find((l) => l.msg === "request failed")).toMatchObject({
      level: "error",
      trace_id: callerTrace,
    });
  } finally {
    await faulty.close(1_000);
  }
});

test("an engine that dies mid-stream: the server span says 200 was sent, then the error told in the stream, with an error status (found by an outside tester: it had none)", async () => {
  const engine = [
    "require('node:http').createServer((req, res) => {",
    "  if (req.url === '/health') return res.end();",
    "  let body = ''; req.on('data', (c) => (body += c)); req.on('end', () => {",
    "    if (!body.includes('midstream')) { res.setHeader('content-type', 'application/json'); return res.end('{\"choices\":[{\"index\":0,\"text\":\"ok\"}]}'); }",
    "    res.writeHead(200, { 'content-type': 'text/event-stream' });",
    '    res.write(\'data: {"choices":[{"index":0,"delta":{"content":"a"}}]}\\n\\n\');',
    "    setTimeout(() => process.exit(7), 100);",
    "  });",
    "}).listen(Number(process.argv[1]), '127.0.0.1');",
  ].join("\n");
  const dying = await startWith(`
models:
  breaks:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
`);
  try {
    const callerTrace = "7bf92f3577b34da6a3ce929d0e0e4742";
    const init = chat("breaks", { stream: true, messages: [{ role: "user", content: "midstream" }] });
    const response = await fetch(`${dying.url}/v1/chat/completions`, {
      ...init,
      headers: { ...init.headers, traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` },
    });
    const text = await response.text();
    expect([response.status, text]).toEqual([200, expect.stringContaining('"code":"upstream_broken"')]);
    const server = () =>
      exporter
        .getFinishedSpans()
        .find((s) => s.spanContext().traceId === callerTrace && s.kind === SpanKind.SERVER);
    await until(() => server() !== undefined, 2_000, "the server span");
    expect(server()!.attributes).toMatchObject({
      "http.response.status_code": 200,
      "error.type": "upstream_broken",
    });
    expect(server()!.status.code).toBe(SpanStatusCode.ERROR);
  } finally {
    await dying.close(1_000);
  }
});

test("a request sent again after its engine dropped the connection: a snooze.resend event on its server span, one CLIENT span per try", async () => {
  const callerTrace = "6bf92f3577b34da6a3ce929d0e0e4738";
  // The model is ready from the tests before: its engine drops the next request's connection.
  const address = snooze.autoscaler.controller("qwen")!.state().address!;
  const set = await fetch(`http://${address}/sim/faults`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ dropConnection: 1 }),
  });
  expect(set.status).toBe(200);
  const init = chat("qwen");
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    ...init,
    headers: { ...init.headers, traceparent: `00-${callerTrace}-00f067aa0ba902b7-01` },
  });
  expect(response.status).toBe(200);
  await until(
    () =>
      exporter
        .getFinishedSpans()
        .some((s) => s.spanContext().traceId === callerTrace && s.kind === SpanKind.SERVER),
    2_000,
    "the server span",
  );
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === callerTrace);
  const server = spans.find((s) => s.kind === SpanKind.SERVER)!;
  const resends = server.events.filter((e) => e.name === "snooze.resend");
  expect(resends).toHaveLength(1);
  expect(resends[0]!.attributes).toMatchObject({ "error.type": "unreachable", "snooze.resend.attempt": 1 });
  const clients = spans.filter((s) => s.kind === SpanKind.CLIENT);
  expect(clients.map((c) => c.attributes["error.type"])).toEqual(["unreachable", undefined]);
});

describe("an incoming event continues its caller's trace (found by an outside tester: both traceparents were ignored)", () => {
  let events: LocalSnooze;
  beforeAll(async () => {
    events = await startWith(`
models:
  viaheader: { command: ${simCommand()} }
  viaextension: { command: ${simCommand()} }
  unsampled: { command: ${simCommand()} }
  prewarmed: { prewarmBudget: 1h, command: ${simCommand()} }
  future: { command: ${simCommand()} }
  versionff: { command: ${simCommand()} }
`);
  });
  afterAll(() => events.close(1_000));

  /** A binary-mode event for `model`, with the HTTP headers given (traceparent, ce-traceparent). */
  async function send(
    type: string,
    model: string,
    headers: Record<string, string>,
    data?: unknown,
    status = 202,
  ) {
    const response = await fetch(`${events.url}/snooze/v1/events`, {
      method: "POST",
      headers: {
        "content-type": "application/json",
        "ce-specversion": "1.0",
        "ce-id": `trace-${model}`,
        "ce-source": "/test/tracing",
        "ce-type": type,
        "ce-subject": model,
        ...headers,
      },
      body: data === undefined ? undefined : JSON.stringify(data),
    });
    expect(response.status).toBe(status);
  }
  const wake = (model: string, headers: Record<string, string>) =>
    send("dev.snooze.model.wake", model, headers);

  async function activationOf(model: string) {
    await until(
      () =>
        exporter
          .getFinishedSpans()
          .some((s) => s.name === "snooze.activation" && s.attributes["snooze.model"] === model),
      10_000,
      `the activation of ${model}`,
    );
    return exporter
      .getFinishedSpans()
      .find((s) => s.name === "snooze.activation" && s.attributes["snooze.model"] === model)!;
  }
  const serverSpanIn = (traceId: string) =>
    exporter
      .getFinishedSpans()
      .find(
        (s) => s.kind === SpanKind.SERVER && s.spanContext().traceId === traceId && s.name.includes("events"),
      );

  test("HTTP traceparent (a Broker's delivery): a SERVER span continues it, and the activation is that span's child", async () => {
    const traceId = "6bf92f3577b34da6a3ce929d0e0e4731";
    await wake("viaheader", { traceparent: `00-${traceId}-00f067aa0ba902b1-01` });
    const activation = await activationOf("viaheader");
    const server = serverSpanIn(traceId)!;
    expect(server).toBeDefined();
    expect(server.name).toBe("POST /snooze/v1/events");
    expect(server.parentSpanContext?.spanId).toBe("00f067aa0ba902b1");
    expect(server.attributes).toMatchObject({
      "http.route": "/snooze/v1/events",
      "http.response.status_code": 202,
    });
    expect(activation.spanContext().traceId).toBe(traceId);
    expect(activation.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
  });

  test("the event's own ce-traceparent (the distributed-tracing extension) parents the activation, its ce-tracestate goes on with it; the HTTP one, the server span", async () => {
    const httpTrace = "6bf92f3577b34da6a3ce929d0e0e4732";
    const eventTrace = "7bf92f3577b34da6a3ce929d0e0e4732";
    await wake("viaextension", {
      traceparent: `00-${httpTrace}-00f067aa0ba902b2-01`,
      "ce-traceparent": `00-${eventTrace}-10f067aa0ba902b2-01`,
      "ce-tracestate": "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE",
    });
    const activation = await activationOf("viaextension");
    expect(activation.spanContext().traceId).toBe(eventTrace);
    expect(activation.parentSpanContext?.spanId).toBe("10f067aa0ba902b2");
    expect(activation.spanContext().traceState?.serialize()).toBe("rojo=00f067aa0ba902b7,congo=t61rcWkgMzE");
    expect(serverSpanIn(httpTrace)?.parentSpanContext?.spanId).toBe("00f067aa0ba902b2");
  });

  test("an event's traceparent of a higher version is continued as the HTTP header is (W3C forward compatibility); version ff is refused", async () => {
    // Found by an outside tester: `01-…` in ce-traceparent began a new trace, while the same value
    // as an HTTP traceparent was continued.
    const futureTrace = "8bf92f3577b34da6a3ce929d0e0e4733";
    await wake("future", { "ce-traceparent": `01-${futureTrace}-20f067aa0ba902b3-01-what-comes-next` });
    const future = await activationOf("future");
    expect(future.spanContext().traceId).toBe(futureTrace);
    expect(future.parentSpanContext?.spanId).toBe("20f067aa0ba902b3");

    const httpTrace = "6bf92f3577b34da6a3ce929d0e0e4734";
    const refusedTrace = "9bf92f3577b34da6a3ce929d0e0e4734";
    await wake("versionff", {
      traceparent: `00-${httpTrace}-00f067aa0ba902b4-01`,
      "ce-traceparent": `ff-${refusedTrace}-30f067aa0ba902b4-01`,
    });
    const refused = await activationOf("versionff");
    // Not the ff one: the delivery's trace, through its server span.
    expect(refused.spanContext().traceId).toBe(httpTrace);
    expect(refused.parentSpanContext?.spanId).toBe(serverSpanIn(httpTrace)!.spanContext().spanId);
  });

  test("a delivery the admin guard refuses (no token) still gets its SERVER span, with the status, in the sender's trace", async () => {
    const guarded = await startLocalSnooze({
      config: parseConfig(`models:\n  guarded: { command: ${simCommand()} }\n`, "test.yaml"),
      log: silentLogger,
      host: "127.0.0.1",
      port: 0,
      adminToken: "s3cret-token",
    });
    try {
      const traceId = "6bf92f3577b34da6a3ce929d0e0e4735";
      const response = await fetch(`${guarded.url}/snooze/v1/events`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          traceparent: `00-${traceId}-00f067aa0ba902b5-01`,
          "ce-specversion": "1.0",
          "ce-id": "refused-1",
          "ce-source": "/test/tracing",
          "ce-type": "dev.snooze.model.wake",
          "ce-subject": "guarded",
        },
      });
      expect(response.status).toBe(401);
      const server = serverSpanIn(traceId);
      expect(server?.parentSpanContext?.spanId).toBe("00f067aa0ba902b5");
      expect(server?.attributes["http.response.status_code"]).toBe(401);
    } finally {
      await guarded.close(1_000);
    }
  });

  test("an event its sampler passed over: the activation begins a trace of its own, linked to it, as a held request's does", async () => {
    const eventTrace = "7bf92f3577b34da6a3ce929d0e0e4733";
    await wake("unsampled", { "ce-traceparent": `00-${eventTrace}-10f067aa0ba902b3-00` });
    const activation = await activationOf("unsampled");
    expect(activation.spanContext().traceId).not.toBe(eventTrace);
    expect(activation.parentSpanContext).toBeUndefined();
    expect(activation.links.map((l) => l.context.spanId)).toEqual(["10f067aa0ba902b3"]);
  });

  test("a prewarm event: its snooze.prewarm span is in the event's trace, the activation under it", async () => {
    const eventTrace = "7bf92f3577b34da6a3ce929d0e0e4734";
    await send(
      "dev.snooze.model.prewarm",
      "prewarmed",
      { "ce-traceparent": `00-${eventTrace}-10f067aa0ba902b4-01` },
      { for: "10m" },
    );
    const activation = await activationOf("prewarmed");
    // A stop ends the prewarm (its span with it), so the exporter has it.
    await send("dev.snooze.model.stop", "prewarmed", { "ce-id": "trace-prewarmed-stop" }, undefined, 200);
    await until(
      () =>
        exporter
          .getFinishedSpans()
          .some((s) => s.name === "snooze.prewarm" && s.spanContext().traceId === eventTrace),
      5_000,
      "the prewarm span",
    );
    const prewarm = exporter
      .getFinishedSpans()
      .find((s) => s.name === "snooze.prewarm" && s.spanContext().traceId === eventTrace)!;
    expect(prewarm.parentSpanContext?.spanId).toBe("10f067aa0ba902b4");
    expect(activation.spanContext().traceId).toBe(eventTrace);
    expect(activation.parentSpanContext?.spanId).toBe(prewarm.spanContext().spanId);
  });
});

test("a failed start's lines carry its activation's trace ids: the engine's exit, the stop, the tier to cold (found by an outside tester)", async () => {
  const lines: Record<string, unknown>[] = [];
  const failing = await startWith(
    `
models:
  dies:
    command: ["sh", "-c", "echo no weights \${PORT}; exit 3"]
  slow:
    command: ["sh", "-c", "sleep 30 \${PORT}"]
    startTimeout: 1s
`,
    createLogger({}, (line) => void lines.push(JSON.parse(line)), "info"),
  );
  try {
    for (const model of ["dies", "slow"])
      expect((await fetch(`${failing.url}/v1/chat/completions`, chat(model))).status).toBe(503);
    const cold = (model: string) => (l: Record<string, unknown>) =>
      l.model === model && l.msg === "tier" && l.to === "cold";
    await until(() => lines.some(cold("dies")) && lines.some(cold("slow")), 5_000, "both engines gone");
    const activations = exporter.getFinishedSpans().filter((s) => s.name === "snooze.activation");
    for (const [model, said] of [
      ["dies", ["engine exited on its own", "tier starting→cold", "activation failed"]],
      ["slow", ["activation failed", "stopping", "tier starting→cold"]],
    ] as const) {
      const activation = activations.find((s) => s.attributes["snooze.model"] === model)!;
      const { traceId, spanId } = activation.spanContext();
      const after = lines.filter(
        (l) =>
          l.model === model &&
          lines.indexOf(l) > lines.findIndex((x) => x.msg === "starting" && x.model === model),
      );
      const named = (l: Record<string, unknown>) => (l.msg === "tier" ? `tier ${l.from}→${l.to}` : l.msg);
      const failed = after.filter((l) => said.includes(named(l) as never));
      expect(failed.map(named), model).toEqual(said);
      for (const line of failed)
        expect([named(line), line.trace_id, line.span_id]).toEqual([named(line), traceId, spanId]);
    }
  } finally {
    await failing.close(1_000);
  }
}, 20_000);

test("a person's wake through the admin API continues the caller's trace: a SERVER span named by the route, the activation its child; sleep and unknown models have their span too", async () => {
  // Found by an outside tester: a traced POST /snooze/v1/models/{model}/wake began a trace of its
  // own, and the call showed nowhere in the caller's.
  const admin = await startWith(`
models:
  woken: { command: ${simCommand(["--enable-sleep-mode"])} }
`);
  try {
    const traceId = "8bf92f3577b34da6a3ce929d0e0e4741";
    const callerSpan = "00f067aa0ba902b7";
    const headers = { traceparent: `00-${traceId}-${callerSpan}-01` };
    const post = (path: string) => fetch(`${admin.url}${path}`, { method: "POST", headers });
    expect((await post("/snooze/v1/models/woken/wake")).status).toBe(202);
    await until(
      () =>
        exporter
          .getFinishedSpans()
          .some((s) => s.name === "snooze.activation" && s.attributes["snooze.model"] === "woken"),
      10_000,
      "the activation",
    );
    expect((await post("/snooze/v1/models/woken/sleep")).status).toBe(200);
    expect((await post("/snooze/v1/models/nobody/wake")).status).toBe(404);
    const inTrace = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    await until(
      () => inTrace().filter((s) => s.kind === SpanKind.SERVER).length === 3,
      2_000,
      "server spans",
    );
    const servers = inTrace().filter((s) => s.kind === SpanKind.SERVER);
    expect(
      servers.map((s) => [s.name, s.attributes["http.response.status_code"], s.parentSpanContext?.spanId]),
    ).toEqual([
      ["POST /snooze/v1/models/{model}/wake", 202, callerSpan],
      ["POST /snooze/v1/models/{model}/sleep", 200, callerSpan],
      ["POST /snooze/v1/models/{model}/wake", 404, callerSpan],
    ]);
    const activation = inTrace().find((s) => s.name === "snooze.activation")!;
    expect(activation.parentSpanContext?.spanId).toBe(servers[0]!.spanContext().spanId);
    // The sleep itself is a trace of its own, as every person's sleep is.
    expect(
      exporter
        .getFinishedSpans()
        .some((s) => s.name === "snooze.sleep" && s.attributes["snooze.model"] === "woken"),
    ).toBe(true);
    expect(inTrace().map((s) => s.name)).not.toContain("snooze.sleep");
  } finally {
    await admin.close(1_000);
  }
});

test("a listing's hint continues the caller's trace: GET /v1/models/{model} that prewarms a model has the snooze.prewarm span under it, the activation under that (found by an outside tester: the hint's wake began a trace of its own)", async () => {
  const hinting = await startWith(`
models:
  hinted: { prewarmBudget: 1h, command: ${simCommand(["--enable-sleep-mode"])} }
`);
  try {
    const traceId = "8bf92f3577b34da6a3ce929d0e0e4751";
    const callerSpan = "00f067aa0ba902c1";
    const response = await fetch(`${hinting.url}/v1/models/hinted`, {
      headers: { traceparent: `00-${traceId}-${callerSpan}-01` },
    });
    expect(response.status).toBe(200);
    await response.text();
    const inTrace = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    await until(
      () => inTrace().some((s) => s.name === "snooze.activation"),
      10_000,
      "the hint's activation in the caller's trace",
    );
    // A stop ends the prewarm, and with it its span.
    expect((await fetch(`${hinting.url}/snooze/v1/models/hinted/stop`, { method: "POST" })).status).toBe(200);
    await until(() => inTrace().some((s) => s.name === "snooze.prewarm"), 5_000, "the prewarm span");
    const server = inTrace().find((s) => s.kind === SpanKind.SERVER)!;
    expect(server.parentSpanContext?.spanId).toBe(callerSpan);
    const prewarm = inTrace().find((s) => s.name === "snooze.prewarm")!;
    expect(prewarm.attributes["snooze.prewarm.kind"]).toBe("hint");
    expect(prewarm.parentSpanContext?.spanId).toBe(server.spanContext().spanId);
    const activation = inTrace().find((s) => s.name === "snooze.activation")!;
    expect(activation.parentSpanContext?.spanId).toBe(prewarm.spanContext().spanId);
  } finally {
    await hinting.close(1_000);
  }
});

test("an engine's error answer is an error of its CLIENT span, named in error.type by its status code, as the HTTP conventions ask of a client span: a 4xx too, which leaves the server span unset (found by an outside tester: neither had error.type, a 4xx no error status)", async () => {
  // Answers a chat with the status its body asks for, in vLLM's error shape.
  const engine = [
    "const port = Number(process.argv[1]);",
    "require('node:http').createServer((req, res) => {",
    "  if (req.url === '/health') return res.end();",
    "  let body = ''; req.on('data', (c) => (body += c)); req.on('end', () => {",
    "    const status = JSON.parse(body || '{}').want_status ?? 200;",
    "    res.writeHead(status, { 'content-type': 'application/json' });",
    "    res.end(JSON.stringify(status === 200",
    "      ? { choices: [{ index: 0, text: 'ok', message: { role: 'assistant', content: 'ok' } }] }",
    "      : { object: 'error', message: 'no', type: 'Error', param: null, code: status }));",
    "  });",
    "}).listen(port, '127.0.0.1');",
  ].join("\n");
  const failing = await startWith(`
models:
  picky:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
`);
  try {
    const spansFor = async (status: number, traceId: string) => {
      const init = chat("picky", { want_status: status });
      const response = await fetch(`${failing.url}/v1/chat/completions`, {
        ...init,
        headers: { ...init.headers, traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
      });
      expect(response.status).toBe(status);
      await response.text();
      const inTrace = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      await until(() => inTrace().some((s) => s.kind === SpanKind.SERVER), 5_000, "the server span");
      return {
        server: inTrace().find((s) => s.kind === SpanKind.SERVER)!,
        client: inTrace().find((s) => s.kind === SpanKind.CLIENT)!,
      };
    };
    const answered = await spansFor(200, "8bf92f3577b34da6a3ce929d0e0e4761");
    expect(answered.client.status.code).toBe(SpanStatusCode.UNSET);
    expect(answered.client.attributes["error.type"]).toBeUndefined();
    for (const [status, serverStatus] of [
      [400, SpanStatusCode.UNSET],
      [404, SpanStatusCode.UNSET],
      [500, SpanStatusCode.ERROR],
      [503, SpanStatusCode.ERROR],
    ] as const) {
      const { server, client } = await spansFor(status, `8bf92f3577b34da6a3ce929d0e0e4${status}`);
      expect([client.name, client.status.code, client.attributes]).toMatchObject([
        "chat picky",
        SpanStatusCode.ERROR,
        { "http.response.status_code": status, "error.type": String(status) },
      ]);
      expect([server.status.code, server.attributes["http.response.status_code"]]).toEqual([
        serverStatus,
        status,
      ]);
    }
  } finally {
    await failing.close(1_000);
  }
});

test("Anthropic's Messages API (POST /v1/messages, which vLLM serves for Claude's clients) is a chat: its spans are named and attributed as a chat completion's, with the usage it reports (found by an outside tester: its CLIENT span was POST /v1/messages, with no GenAI operation)", async () => {
  // Answers /v1/messages as vLLM does: a message, or (stream) its events, usage in message_delta.
  const engine = [
    "const port = Number(process.argv[1]);",
    "require('node:http').createServer((req, res) => {",
    "  if (req.url === '/health') return res.end();",
    "  let body = ''; req.on('data', (c) => (body += c)); req.on('end', () => {",
    "    const { stream } = JSON.parse(body || '{}');",
    "    const usage = { input_tokens: 7, output_tokens: 2 };",
    "    res.setHeader('content-type', stream ? 'text/event-stream' : 'application/json');",
    "    // Snooze's warm-up, a completion.",
    "    if (req.url === '/v1/completions') return res.end(JSON.stringify({ choices: [{ index: 0, text: 'ok' }] }));",
    "    if (!stream)",
    "      return res.end(JSON.stringify({ id: 'msg_1', type: 'message', role: 'assistant', model: 'claude', content: [{ type: 'text', text: 'ok' }], usage }));",
    "    const event = (type, data) => res.write('event: ' + type + '\\ndata: ' + JSON.stringify({ type, ...data }) + '\\n\\n');",
    "    event('message_start', { message: { id: 'msg_2', type: 'message', role: 'assistant', model: 'claude', content: [], usage: { input_tokens: 7, output_tokens: 0 } } });",
    "    event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'ok' } });",
    "    event('message_delta', { delta: { stop_reason: 'end_turn' }, usage });",
    "    event('message_stop', {});",
    "    res.end();",
    "  });",
    "}).listen(port, '127.0.0.1');",
  ].join("\n");
  const anthropic = await startWith(`
models:
  claude:
    sleep: false
    command: ${JSON.stringify([process.execPath, "-e", engine, "${PORT}"])}
`);
  try {
    for (const [stream, traceId] of [
      [false, "8bf92f3577b34da6a3ce929d0e0e4771"],
      [true, "8bf92f3577b34da6a3ce929d0e0e4772"],
    ] as const) {
      const response = await fetch(`${anthropic.url}/v1/messages`, {
        method: "POST",
        headers: {
          "content-type": "application/json",
          "anthropic-version": "2023-06-01",
          traceparent: `00-${traceId}-00f067aa0ba902b7-01`,
        },
        body: JSON.stringify({
          model: "claude",
          max_tokens: 5,
          stream,
          messages: [{ role: "user", content: "hello" }],
        }),
      });
      expect(response.status).toBe(200);
      await response.text();
      const inTrace = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
      await until(() => inTrace().some((s) => s.kind === SpanKind.SERVER), 5_000, "the server span");
      const server = inTrace().find((s) => s.kind === SpanKind.SERVER)!;
      const client = inTrace().find((s) => s.kind === SpanKind.CLIENT)!;
      expect([server.name, server.attributes]).toMatchObject([
        "POST /v1/messages",
        { "gen_ai.operation.name": "chat", "gen_ai.request.model": "claude" },
      ]);
      expect([client.name, client.attributes]).toMatchObject([
        "chat claude",
        {
          "gen_ai.operation.name": "chat",
          "gen_ai.request.model": "claude",
          "gen_ai.usage.input_tokens": 7,
          "gen_ai.usage.output_tokens": 2,
        },
      ]);
    }
  } finally {
    await anthropic.close(1_000);
  }
});

test("a stored response's retrieve and cancel: the CLIENT span is named by the route, never by the response's id or the query (found by an outside tester: GET /v1/responses/resp_…?stream=false, one name per response)", async () => {
  const stored = await startWith(`
models:
  keeper:
    command: ${simCommand()}
    env: { VLLM_ENABLE_RESPONSES_API_STORE: "1" }
`);
  try {
    const made = await fetch(`${stored.url}/v1/responses`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: "keeper", input: "hello", max_output_tokens: 3, store: true }),
    });
    expect(made.status).toBe(200);
    const { id } = (await made.json()) as { id: string };
    const traceId = "8bf92f3577b34da6a3ce929d0e0e4781";
    const headers = { traceparent: `00-${traceId}-00f067aa0ba902b7-01` };
    const retrieved = await fetch(`${stored.url}/v1/responses/${id}?stream=false`, { headers });
    expect(retrieved.status).toBe(200);
    await retrieved.text();
    const cancelled = await fetch(`${stored.url}/v1/responses/${id}/cancel`, { method: "POST", headers });
    await cancelled.text();
    const inTrace = () => exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
    await until(() => inTrace().filter((s) => s.kind === SpanKind.CLIENT).length === 2, 5_000, "the calls");
    const clients = inTrace().filter((s) => s.kind === SpanKind.CLIENT);
    expect(clients.map((s) => s.name)).toEqual([
      "GET /v1/responses/{response_id}",
      "POST /v1/responses/{response_id}/cancel",
    ]);
    // What was sent is in url.full, as the HTTP conventions have it.
    expect(clients[0]!.attributes["url.full"]).toMatch(new RegExp(`/v1/responses/${id}\\?stream=false$`));
  } finally {
    await stored.close(1_000);
  }
});
