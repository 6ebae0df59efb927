import type { ServerResponse } from "node:http";
import { context, propagation, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, expect, test } from "vitest";
import { chat, metricValue, sharedGpu, simCommand, startWith, until } from "../helpers/local-snooze.ts";
import { cloudEventSink } from "../support/cloudevent-sink.ts";

const exporter = new InMemorySpanExporter();
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  // What the SDK registers by default (OTEL_PROPAGATORS=tracecontext,baggage).
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
});

const closers: (() => void)[] = [];
afterAll(() => {
  for (const close of closers) close();
});

async function sink(answer?: (res: ServerResponse) => void) {
  const target = await cloudEventSink(answer);
  closers.push(() => target.close());
  return target;
}

const model = (sinkUrl: string, extra = "") => `
eventSink: ${sinkUrl}
${extra}
models:
  qwen:
    sleepAfter: 200ms
    command: ${simCommand(["--enable-sleep-mode"])}
`;

test("events of a traced activation carry its traceparent (distributed-tracing extension)", async () => {
  const target = await sink();
  const snooze = await startWith(model(target.url));
  try {
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => snooze.autoscaler.controller("qwen")!.tier === "asleep-1", 5_000, "asleep");
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => target.arrivals.length >= 3, 3_000, "three events");
    const byType = new Map(target.arrivals.map((a) => [a.event.type, a]));
    const activations = exporter.getFinishedSpans().filter((s) => s.name === "snooze.activation");
    const traceparentOf = (kind: string) => {
      const span = activations.find((s) => s.attributes["snooze.activation"] === kind)!;
      const { traceId, spanId } = span.spanContext();
      return `00-${traceId}-${spanId}-01`;
    };
    expect(byType.get("dev.snooze.replica.started")!.event.traceparent).toBe(traceparentOf("start"));
    expect(byType.get("dev.snooze.replica.started")!.headers["ce-traceparent"]).toBe(traceparentOf("start"));
    expect(byType.get("dev.snooze.replica.woke")!.event.traceparent).toBe(traceparentOf("wake"));
    // A sleep is no activation: no trace context.
    expect(byType.get("dev.snooze.replica.slept")!.event.traceparent).toBeUndefined();
    expect(byType.get("dev.snooze.replica.woke")!.event.source).toMatch(/^\/snooze\//);
  } finally {
    await snooze.close(1_000);
  }
});

test("events of an activation in a caller's trace carry the caller's tracestate with the traceparent", async () => {
  // Found by an outside tester: the tracestate went on to every span, but the events only carried
  // the traceparent (the distributed-tracing extension defines both).
  const target = await sink();
  const snooze = await startWith(model(target.url));
  try {
    const callerTrace = "4bf92f3577b34da6a3ce929d0e0e4740";
    const tracestate = "rojo=00f067aa0ba902b7,congo=t61rcWkgMzE";
    const init = chat("qwen");
    const response = await fetch(`${snooze.url}/v1/chat/completions`, {
      ...init,
      headers: { ...init.headers, traceparent: `00-${callerTrace}-00f067aa0ba902b7-01`, tracestate },
    });
    expect(response.status).toBe(200);
    await until(
      () => target.arrivals.some((a) => a.event.type === "dev.snooze.replica.started"),
      3_000,
      "the started event",
    );
    const started = target.arrivals.find((a) => a.event.type === "dev.snooze.replica.started")!;
    expect(String(started.event.traceparent)).toMatch(new RegExp(`^00-${callerTrace}-`));
    expect(started.event.tracestate).toBe(tracestate);
    expect(started.headers["ce-tracestate"]).toBe(tracestate);
    // A sleep is no activation: neither.
    await until(() => snooze.autoscaler.controller("qwen")!.tier === "asleep-1", 5_000, "asleep");
    await until(
      () => target.arrivals.some((a) => a.event.type === "dev.snooze.replica.slept"),
      3_000,
      "the slept event",
    );
    const slept = target.arrivals.find((a) => a.event.type === "dev.snooze.replica.slept")!;
    expect(slept.event.tracestate).toBeUndefined();
  } finally {
    await snooze.close(1_000);
  }
});

test("a slot swap is one dev.snooze.slot.swapped event: the slot, from, to, why, how long, and the swap span's traceparent", async () => {
  const target = await sink();
  const gpu = sharedGpu();
  const snooze = await startWith(`
eventSink: ${target.url}
slots:
  gpu0: { minResidency: 0s, swapCooldown: 0s }
models:
  a: { slot: gpu0, command: ${simCommand(gpu, 0.05)} }
  b: { slot: gpu0, command: ${simCommand(gpu, 0.05)} }
`);
  try {
    for (const m of ["a", "b", "a"])
      expect((await fetch(`${snooze.url}/v1/chat/completions`, chat(m))).status).toBe(200);
    const swaps = () => target.arrivals.filter((a) => a.event.type === "dev.snooze.slot.swapped");
    await until(() => swaps().length >= 2, 3_000, "two swap events");
    const [first, second] = swaps().map((a) => a.event);
    expect(first!.subject).toBe("gpu0");
    expect(first!.data).toMatchObject({ slot: "gpu0", from: "a", to: "b" });
    expect(second!.data).toMatchObject({ slot: "gpu0", from: "b", to: "a" });
    expect(typeof second!.data?.reason).toBe("string");
    expect(second!.data?.durationMs).toBeGreaterThan(0);
    // The event names the swap's own trace, as the held requests' links do.
    const swapSpans = exporter
      .getFinishedSpans()
      .filter((s) => s.name === "snooze.swap" && s.attributes["snooze.swap.to"] === "a");
    const ids = swapSpans.map((s) => `00-${s.spanContext().traceId}-${s.spanContext().spanId}-01`);
    expect(ids).toContain(second!.traceparent);
    // The first grant of an empty slot is no swap: two swaps, not three.
    expect(swaps()).toHaveLength(2);
    // Each replica event still has its own event: the incumbent's slept and the target's woke.
    expect(
      target.arrivals.some((a) => a.event.type === "dev.snooze.replica.woke" && a.event.subject === "a"),
    ).toBe(true);
  } finally {
    await snooze.close(1_000);
  }
});

test("a model named outside ASCII: its events' ce-subject is percent-encoded UTF-8, as the binding says", async () => {
  // Before, the delivery failed ("invalid ce-subject header") and was retried until dropped.
  const target = await sink();
  const snooze = await startWith(`
eventSink: ${target.url}
models:
  模型-ünï:
    command: ${simCommand()}
`);
  try {
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("模型-ünï"))).status).toBe(200);
    await until(() => target.arrivals.length >= 1, 3_000, "an event");
    expect(target.arrivals[0]!.headers["ce-subject"]).toBe("%E6%A8%A1%E5%9E%8B-%C3%BCn%C3%AF");
    expect(target.arrivals[0]!.event.data).toMatchObject({ model: "模型-ünï" });
  } finally {
    await snooze.close(1_000);
  }
});

test("eventMode: structured sends application/cloudevents+json", async () => {
  const target = await sink();
  const snooze = await startWith(model(target.url, "eventMode: structured"));
  try {
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    await until(() => target.arrivals.length >= 1, 3_000, "an event");
    expect(target.arrivals[0]!.headers["content-type"]).toMatch(/^application\/cloudevents\+json/);
    expect(target.arrivals[0]!.event.type).toBe("dev.snooze.replica.started");
  } finally {
    await snooze.close(1_000);
  }
});

test.each([
  ["hangs", (_res: ServerResponse) => {}],
  ["answers 500", (res: ServerResponse) => res.writeHead(500).end()],
  ["drops the connection", (res: ServerResponse) => res.socket?.destroy()],
])("a sink that %s never slows a wake or a request", async (_what, answer) => {
  const target = await sink(answer);
  const snooze = await startWith(model(target.url));
  try {
    const started = performance.now();
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    const coldMs = performance.now() - started;
    await until(() => snooze.autoscaler.controller("qwen")!.tier === "asleep-1", 5_000, "asleep");
    const woke = performance.now();
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    const wakeMs = performance.now() - woke;
    // Each delivery attempt may take 5 s (and is retried with back-off): had one been awaited on
    // the way, the wake would take at least that long. The sim wakes in a few tens of ms here.
    expect(wakeMs).toBeLessThan(1_500);
    expect(coldMs).toBeLessThan(10_000);
    const served = performance.now();
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
    expect(performance.now() - served).toBeLessThan(500);
    // The events were tried (and are being retried), not dropped on the way.
    await until(() => target.arrivals.length >= 3, 3_000, "attempts at the sink");
    const metrics = await snooze.registry.metrics();
    expect(metricValue(metrics, "snooze_cloudevents_total", { outcome: "delivered" })).toBe(0);
  } finally {
    await snooze.close(1_000);
  }
});
