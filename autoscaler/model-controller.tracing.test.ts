import { context, SpanStatusCode, TraceFlags, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { beforeAll, beforeEach, expect, test } from "vitest";
import { createLogger } from "../lib/log.ts";
import { Harness } from "../test/support/autoscaler-harness.ts";

// With a tracer registered (this file only), starting and waking events carry the activation's
// traceparent so held requests can link to it; other tiers carry none. The context manager is the
// SDK's, so a context made active in a test follows its async work as in `snooze serve`.
const exporter = new InMemorySpanExporter();
beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(
    new TracerProvider({ spanProcessors: [new SimpleSpanProcessor({ exporter })] }),
  );
});
beforeEach(() => exporter.reset());

const traceparent = /^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/;
/** Two models sharing one slot. */
const slotYaml = `
slots:
  gpu:
    minResidency: 0s
models:
  a:
    slot: gpu
    command: [engine, "\${PORT}"]
  b:
    slot: gpu
    command: [engine, "\${PORT}"]
`;
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

test("log lines of a start, a release and a wake carry that operation's trace ids", async () => {
  // Found by an outside tester: no line carried them, though tracing.md says every line written
  // inside a traced operation does.
  const lines: Record<string, string>[] = [];
  const log = createLogger({}, (line) => void lines.push(JSON.parse(line)), "debug");
  const h = new Harness(yaml, { log });
  await h.serveCold("m");
  await h.advance(60_000);
  h.demand("m");
  await h.settle();
  const traceOf = (name: string, nth = 0) =>
    exporter
      .getFinishedSpans()
      .filter((s) => s.name === name)
      [nth]!.spanContext().traceId;
  const [start, wake] = [traceOf("snooze.activation", 0), traceOf("snooze.activation", 1)];
  const release = traceOf("snooze.drain");
  expect(new Set([start, wake, release]).size).toBe(3);
  const tierLines = lines
    .filter((l) => l.msg === "tier")
    .map((l) => [`${l.from}→${l.to}`, l.trace_id, typeof l.span_id]);
  expect(tierLines).toEqual([
    ["cold→starting", start, "string"],
    ["starting→ready", start, "string"],
    ["ready→draining", release, "string"],
    ["draining→asleep-1", release, "string"],
    ["asleep-1→waking", wake, "string"],
    ["waking→ready", wake, "string"],
  ]);
  for (const msg of ["starting", "waking engine"])
    expect(lines.find((l) => l.msg === msg)!.trace_id, msg).toMatch(/^[0-9a-f]{32}$/);
  expect(lines.filter((l) => l.msg === "engine ready").map((l) => l.trace_id)).toEqual([start, wake]);
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

test("a caller its sampler passed over: the activation is a trace of its own, linked to it, and recorded", async () => {
  // Found by an outside tester: the activation inherited the first caller's "not sampled", so the
  // sampled requests that waited on it too linked to a cold start no collector ever saw.
  const h = new Harness(yaml);
  const unsampled = trace.wrapSpanContext({
    traceId: "a".repeat(32),
    spanId: "a".repeat(16),
    traceFlags: TraceFlags.NONE,
    isRemote: true,
  });
  h.autoscaler.demand("local", "m", undefined, trace.setSpan(context.active(), unsampled));
  await h.settle();
  h.platform.bringUp(h.platform.ids("m")[0]!);
  await h.settle();
  const [activation] = exporter.getFinishedSpans().filter((s) => s.name === "snooze.activation");
  expect(activation, "the activation was recorded").toBeDefined();
  expect(activation!.spanContext().traceId).not.toBe("a".repeat(32));
  expect(activation!.parentSpanContext).toBeUndefined();
  expect(activation!.links.map((l) => l.context.spanId)).toEqual(["a".repeat(16)]);
  expect(exporter.getFinishedSpans().map((s) => s.name)).toContain("snooze.start");
});

test("an idle sleep after a traced cold start is a trace of its own: the drain its root, the sleep its child", async () => {
  const h = new Harness(yaml);
  const caller = trace.getTracer("test").startSpan("POST /v1/chat/completions");
  // The demand made inside the caller's async context, as the local activator makes it: every
  // pass and timer the controller arms from there must not carry that context along.
  context.with(trace.setSpan(context.active(), caller), () => h.demand("m"));
  await h.settle();
  h.platform.bringUp(h.platform.ids("m")[0]!);
  await h.settle();
  caller.end();
  h.stats("m", 0, 0);
  await h.advance(60_000);
  expect(h.tiers("m")).toEqual(["starting", "ready", "draining", "asleep-1"]);
  const spans = exporter.getFinishedSpans();
  const [activation] = spans.filter((s) => s.name === "snooze.activation");
  const [drain] = spans.filter((s) => s.name === "snooze.drain");
  const [sleep] = spans.filter((s) => s.name === "snooze.sleep");
  expect(activation!.spanContext().traceId).toBe(caller.spanContext().traceId);
  expect(drain!.spanContext().traceId).not.toBe(caller.spanContext().traceId);
  expect(drain!.parentSpanContext).toBeUndefined();
  expect(sleep!.spanContext().traceId).toBe(drain!.spanContext().traceId);
  expect(sleep!.parentSpanContext?.spanId).toBe(drain!.spanContext().spanId);
});

test("in a slot, the grant of an empty slot is no swap: the start continues the caller's trace", async () => {
  const h = new Harness(slotYaml);
  const caller = trace.getTracer("test").startSpan("POST /v1/chat/completions");
  context.with(trace.setSpan(context.active(), caller), () => h.demand("a"));
  await h.settle();
  h.platform.bringUp(h.platform.ids("a")[0]!);
  await h.settle();
  expect(h.controller("a").tier).toBe("ready");
  caller.end();
  const spans = exporter.getFinishedSpans();
  expect(spans.map((s) => s.name)).not.toContain("snooze.swap");
  const [activation] = spans.filter((s) => s.name === "snooze.activation");
  expect(activation!.spanContext().traceId).toBe(caller.spanContext().traceId);
  expect(activation!.parentSpanContext?.spanId).toBe(caller.spanContext().spanId);
});

test("Snooze's shutdown: an activation under way ends (outcome stopped), and each replica is reported stopped", async () => {
  // Found by an outside tester: a SIGTERM during a cold start left its spans open for ever, and no
  // consumer heard that the engines Snooze stopped were gone.
  const h = new Harness(`${yaml}  n:\n    command: [engine, "\${PORT}"]\n`, { direct: { sink: true } });
  await h.serveCold("m");
  h.demand("n");
  await h.settle();
  expect(h.controller("n").tier).toBe("starting");
  await h.autoscaler.close({ enginesStop: true });
  const activation = exporter
    .getFinishedSpans()
    .filter((s) => s.name === "snooze.activation" && s.attributes["snooze.model"] === "n");
  expect(activation.map((s) => s.attributes["snooze.activation.outcome"])).toEqual(["stopped"]);
  expect(exporter.getFinishedSpans().filter((s) => s.name === "snooze.start")).toHaveLength(2);
  const stopped = h.cloudEvents.filter((e) => e.type === "dev.snooze.replica.stopped");
  expect(stopped.map((e) => [e.subject, e.data.from])).toEqual([
    ["m", "ready"],
    ["n", "starting"],
  ]);
});

test("standing down without stopping the engines (Kubernetes) says nothing of them", async () => {
  const h = new Harness(yaml, { direct: { sink: true } });
  await h.serveCold("m");
  await h.autoscaler.close();
  expect(h.cloudEvents.filter((e) => e.type === "dev.snooze.replica.stopped")).toEqual([]);
});

test("a swap whose target never becomes ready ends with an error status", async () => {
  // Found by an outside tester: its span said nothing was wrong.
  const h = new Harness(slotYaml);
  await h.serveCold("a");
  h.demand("b");
  await h.settle();
  const [b] = h.platform.ids("b");
  h.platform.crash(b!, "engine exited (code 1)");
  await h.settle();
  const [swap] = exporter.getFinishedSpans().filter((s) => s.name === "snooze.swap");
  expect(swap!.attributes["snooze.swap.outcome"]).toBe("the target is cold");
  expect(swap!.status.code).toBe(SpanStatusCode.ERROR);
});

test("a warm-up this process could not make (out of file descriptors) is skipped, and its span says so; the wake is ready", async () => {
  const h = new Harness(yaml);
  const id = await h.serveCold("m");
  await h.advance(60_000);
  exporter.reset();
  h.platform.engineOf(id).localFailNext("warmup");
  h.demand("m");
  await h.settle();
  expect(h.controller("m").tier).toBe("ready");
  const [warmup] = exporter.getFinishedSpans().filter((s) => s.name === "snooze.warmup");
  expect(warmup!.attributes["snooze.warmup.skipped"]).toBe("local");
  expect(warmup!.status.code).not.toBe(SpanStatusCode.ERROR);
  const [activation] = exporter.getFinishedSpans().filter((s) => s.name === "snooze.activation");
  expect(activation!.attributes["snooze.activation.outcome"]).toBe("ready");
});
