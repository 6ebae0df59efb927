import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { TracerProvider } from "@opentelemetry/sdk-trace";
import { beforeAll, expect, test } from "vitest";
import { createLogger } from "./log.ts";
// Loading the tracing module is what makes log lines carry span ids.
import "./tracing.ts";

beforeAll(() => {
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  trace.setGlobalTracerProvider(new TracerProvider());
});

test("a line written inside a span carries its trace_id and span_id; outside one, none", async () => {
  const lines: string[] = [];
  const log = createLogger({ component: "test" }, (line) => lines.push(line));
  const span = trace.getTracer("test").startSpan("work");
  await context.with(trace.setSpan(context.active(), span), async () => {
    await Promise.resolve();
    log.info("inside");
  });
  log.info("outside");
  span.end();
  const [inside, outside] = lines.map((line) => JSON.parse(line));
  expect(inside).toMatchObject({
    msg: "inside",
    trace_id: span.spanContext().traceId,
    span_id: span.spanContext().spanId,
  });
  expect(outside.trace_id).toBeUndefined();
  expect(outside.span_id).toBeUndefined();
});

test("a field named level, msg or time does not overwrite the line's own (found in the simulator's sleep log)", () => {
  const lines: string[] = [];
  const log = createLogger({ msg: "base" }, (line) => lines.push(line), "debug");
  log.warn("asleep", { level: 1, time: "yesterday" });
  const line = JSON.parse(lines[0]!);
  expect(line).toMatchObject({ level: "warn", msg: "asleep" });
  expect(Number.isNaN(Date.parse(line.time))).toBe(false);
  expect(Object.keys(line).slice(0, 3)).toEqual(["time", "level", "msg"]);
});
