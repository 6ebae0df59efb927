import { trace } from "@opentelemetry/api";
import { TracerProvider } from "@opentelemetry/sdk-trace";
import { expect, test } from "vitest";
import { tracer, tracingRegistered } from "./tracing.ts";

test("tracing counts as registered once a tracer provider is, and spans record from then on", () => {
  expect(tracingRegistered()).toBe(false);
  expect(tracer.startSpan("before").isRecording()).toBe(false);
  trace.setGlobalTracerProvider(new TracerProvider());
  try {
    expect(tracingRegistered()).toBe(true);
    expect(tracer.startSpan("after").isRecording()).toBe(true);
  } finally {
    trace.disable();
  }
  expect(tracingRegistered()).toBe(false);
});
