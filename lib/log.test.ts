import { context, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { TracerProvider } from "@opentelemetry/sdk-trace";
import { beforeAll, expect, test } from "vitest";
import { freePort } from "./free-port.ts";
import { createLogger, envLevel } from "./log.ts";
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

test("SNOOZE_LOG_LEVEL is read in any case; one that names no level is said once, and info is used", () => {
  // Found by an outside tester: `DEBUG` and `verbose` gave info without a word; `toString` passed.
  const lines: string[] = [];
  const write = (line: string) => void lines.push(line);
  expect(envLevel("DEBUG", write)).toBe("debug");
  expect(envLevel("warn", write)).toBe("warn");
  expect(envLevel(undefined, write)).toBe("info");
  expect(envLevel("", write)).toBe("info");
  expect(lines).toEqual([]);
  expect(envLevel("toString", write)).toBe("info");
  expect(envLevel("verbose", write)).toBe("info");
  expect(lines).toHaveLength(1);
  expect(JSON.parse(lines[0]!)).toMatchObject({
    level: "warn",
    msg: "SNOOZE_LOG_LEVEL is not a log level (debug, info, warn, error); logging at info",
    value: "toString",
  });
});

test("an error is logged with its system code and its causes: a failed fetch says why (found by an outside tester: `fetch failed` alone)", async () => {
  const lines: string[] = [];
  const log = createLogger({}, (line) => lines.push(line));
  // A port nothing listens on: the connection is refused.
  const error = await fetch(`http://127.0.0.1:${await freePort()}/`).catch((e: unknown) => e);
  log.warn("could not reach the autoscaler", { error });
  const logged = JSON.parse(lines[0]!).error;
  expect(logged).toMatchObject({
    name: "TypeError",
    message: "fetch failed",
    cause: { code: "ECONNREFUSED", message: expect.stringContaining("ECONNREFUSED") },
  });
  const looped = new Error("outer");
  looped.cause = looped;
  log.warn("looped", { error: looped, reason: new Error("plain", { cause: "a string" }) });
  const line = JSON.parse(lines[1]!);
  expect(line.error).toMatchObject({
    message: "outer",
    cause: { message: "outer", cause: { message: "outer" } },
  });
  expect(line.reason).toEqual({ name: "Error", message: "plain", cause: "a string" });
});

test("a field JSON cannot hold costs the line its fields, not the caller an exception", () => {
  const lines: string[] = [];
  const log = createLogger({ component: "test" }, (line) => lines.push(line));
  const circular: Record<string, unknown> = {};
  circular.self = circular;
  expect(() => log.error("failed", { circular })).not.toThrow();
  expect(() => log.error("counted", { n: 10n })).not.toThrow();
  expect(lines.map((line) => JSON.parse(line))).toEqual([
    expect.objectContaining({
      level: "error",
      msg: "failed",
      unwritable: expect.stringContaining("circular"),
    }),
    expect.objectContaining({
      level: "error",
      msg: "counted",
      unwritable: expect.stringContaining("BigInt"),
    }),
  ]);
});

test("a line holds no character that ends or reorders a line for its readers: written as \\u escapes, it parses to the same text", () => {
  const lines: string[] = [];
  const log = createLogger({}, (line) => lines.push(line), "debug");
  const text = "a\u2028b\u2029c\u0085d\u009be\u202ef\u2066g\u200eh\x1bi";
  log.warn(`said ${text}`, { reason: text, [`key${text}`]: 1, error: new Error(text) });
  for (const line of lines) {
    expect(line.endsWith("\n")).toBe(true);
    expect(line.slice(0, -1)).not.toMatch(/[\p{Cc}\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/u);
  }
  const record = JSON.parse(lines[0]!);
  expect(record).toMatchObject({
    msg: `said ${text}`,
    reason: text,
    [`key${text}`]: 1,
    error: { message: text },
  });
});
