import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { InMemorySpanExporter, SimpleSpanProcessor, TracerProvider } from "@opentelemetry/sdk-trace";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

const exporter = new InMemorySpanExporter();
let snooze: LocalSnooze;
beforeAll(async () => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
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
