import { type Context, context, propagation, type Span, SpanStatusCode, trace } from "@opentelemetry/api";

/** The tracer every Snooze span comes from; a no-op until an SDK is registered (see lib/telemetry.ts). */
export const tracer = trace.getTracer("snooze");

/** Runs `fn` inside a child span named `name`, recording failure. */
export async function inSpan<T>(
  name: string,
  attributes: Record<string, string | number | boolean>,
  fn: (span: Span) => Promise<T>,
  parent: Context = context.active(),
): Promise<T> {
  return tracer.startActiveSpan(name, { attributes }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (error) {
      span.recordException(error as Error);
      span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error).message });
      throw error;
    } finally {
      span.end();
    }
  });
}

/** The W3C traceparent of a span, so other spans (and other processes) can link to it. */
export function traceparentOf(span: Span): string | undefined {
  const carrier: Record<string, string> = {};
  propagation.inject(trace.setSpan(context.active(), span), carrier);
  return carrier.traceparent;
}
