import { context, trace } from "@opentelemetry/api";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { beforeAll, beforeEach, expect, test } from "vitest";
import { Harness } from "../test/support/autoscaler-harness.ts";

// With a tracer registered (this file only), starting and waking events carry the activation's
// traceparent so held requests can link to it; other tiers carry none.
const exporter = new InMemorySpanExporter();
beforeAll(() => {
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
});
beforeEach(() => exporter.reset());

const traceparent = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;
const yaml = `
defaults:
  sleepAfter: 1m
models:
  m:
    command: [engine, "\${PORT}"]
`;

test("a cold start and a wake each carry their activation's traceparent while warming", async () => {
  const h = new Harness(yaml);
  const id = await h.serveCold("m");
  await h.advance(60_000);
  h.demand("m");
  await h.settle();
  expect(h.tiers("m")).toEqual(["starting", "ready", "draining", "asleep-1", "waking", "ready"]);
  const [starting, ready, draining, asleep, waking, woke] = h.eventsOf("m", id);
  expect(starting!.traceparent).toMatch(traceparent);
  expect(waking!.traceparent).toMatch(traceparent);
  expect(waking!.traceparent).not.toBe(starting!.traceparent);
  for (const event of [ready, draining, asleep, woke]) expect(event!.traceparent).toBeUndefined();

  const activations = exporter.getFinishedSpans().filter((s) => s.name === "snooze.activation");
  expect(
    activations.map((s) => [s.attributes["snooze.activation"], s.attributes["snooze.activation.outcome"]]),
  ).toEqual([
    ["start", "ready"],
    ["wake", "ready"],
  ]);
  const [start] = activations;
  expect(starting!.traceparent).toContain(start!.spanContext().spanId);
  const names = exporter.getFinishedSpans().map((s) => s.name);
  expect(names).toEqual(
    expect.arrayContaining(["snooze.start", "snooze.warmup", "snooze.drain", "snooze.sleep", "snooze.wake"]),
  );
});

test("the CloudEvents that end an activation carry its traceparent", async () => {
  const h = new Harness(yaml, { direct: { sink: true } });
  await h.serveCold("m");
  await h.advance(60_000);
  h.demand("m");
  await h.settle();
  const [starting] = h.eventsOf("m").filter((e) => e.tier === "starting");
  const [waking] = h.eventsOf("m").filter((e) => e.tier === "waking");
  expect(h.cloudEvents.map((e) => [e.type, e.extras?.traceparent])).toEqual([
    ["dev.snooze.replica.started", starting!.traceparent],
    ["dev.snooze.replica.slept", undefined],
    ["dev.snooze.replica.woke", waking!.traceparent],
  ]);
});

test("the held request's trace: the activation its demand causes is a child of the caller's span", async () => {
  const h = new Harness(yaml);
  const tracer = trace.getTracer("test");
  const caller = tracer.startSpan("POST /v1/chat/completions");
  const callerContext = trace.setSpan(context.active(), caller);
  // Demand from outside the caller's async context, with its context passed along (as over HTTP).
  h.autoscaler.demand("local", "m", undefined, callerContext);
  await h.settle();
  h.platform.bringUp(h.platform.ids("m")[0]!);
  await h.settle();
  caller.end();
  const [activation] = exporter.getFinishedSpans().filter((s) => s.name === "snooze.activation");
  expect(activation!.spanContext().traceId).toBe(caller.spanContext().traceId);
  expect(activation!.parentSpanContext?.spanId).toBe(caller.spanContext().spanId);
  // A drain later is no part of that request's trace.
  h.stats("m", 0, 0);
  await h.advance(60_000);
  const [drain] = exporter.getFinishedSpans().filter((s) => s.name === "snooze.drain");
  expect(drain!.spanContext().traceId).not.toBe(caller.spanContext().traceId);
});
