import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";
import {
  type Context,
  context,
  defaultTextMapGetter,
  isSpanContextValid,
  ProxyTracerProvider,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import type * as OpenTelemetryCore from "@opentelemetry/core";
import { setTraceIdSource } from "./log.ts";

/** The tracer every Snooze span comes from; a no-op until an SDK is registered (see lib/telemetry.ts). */
export const tracer = trace.getTracer("snooze");

/**
 * Whether a tracer provider (an SDK) is registered. Without one every span is a no-op that drops
 * its attributes, so what only a span would read (attributes parsed from the request, the token
 * usage read from the answer) is not worth computing on the request path.
 */
export function tracingRegistered(): boolean {
  const provider = trace.getTracerProvider();
  return !(provider instanceof ProxyTracerProvider) || provider.getDelegateTracer("snooze") !== undefined;
}

// Log lines written inside a span carry its ids (lib/log.ts asks through this source).
setTraceIdSource(() => {
  const spanContext = trace.getActiveSpan()?.spanContext();
  return spanContext && isSpanContextValid(spanContext)
    ? { trace_id: spanContext.traceId, span_id: spanContext.spanId }
    : {};
});

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

/**
 * The W3C traceparent of a span, written directly rather than through the
 * global propagator, so links between Snooze's own spans work whatever
 * propagator a user configures for outgoing requests.
 */
export function traceparentOf(span: Span): string | undefined {
  const { traceId, spanId, traceFlags } = span.spanContext();
  if (!isSpanContextValid(span.spanContext())) return undefined;
  return `00-${traceId}-${spanId}-${traceFlags.toString(16).padStart(2, "0")}`;
}

/**
 * The W3C trace context a CloudEvent about a span carries (the distributed-tracing extension defines
 * both): its traceparent and, when the trace has vendor entries (the caller's), its tracestate.
 */
export function traceContextOf(span: Span): { traceparent?: string; tracestate?: string } {
  const traceparent = traceparentOf(span);
  if (!traceparent) return {};
  const tracestate = span.spanContext().traceState?.serialize();
  return { traceparent, ...(tracestate ? { tracestate } : {}) };
}

const require = createRequire(import.meta.url);
// The ES module build, the one `@opentelemetry/api` above and the SDK (lib/telemetry.ts) import: its
// CommonJS build would bring a second copy of the API and, with tracing on, of the core itself.
const coreModule = fileURLToPath(import.meta.resolve("@opentelemetry/core"));
let propagator: OpenTelemetryCore.W3CTraceContextPropagator | undefined;

/**
 * W3C Trace Context parsing, the one implementation for every traceparent Snooze reads: OpenTelemetry's
 * own propagator, as the HTTP `traceparent` of the default `OTEL_PROPAGATORS` is read. It continues a
 * higher version by its first fields (W3C forward compatibility) and refuses version `ff`. Loaded
 * with the first traceparent read: `@opentelemetry/core` and the semantic conventions it imports
 * are 36 modules and 1–2 MiB of an idle `snooze serve`'s RSS (issue 14), and with tracing off
 * most processes never read one. Loaded synchronously by `require`, which takes an ES module.
 */
function w3c(): OpenTelemetryCore.W3CTraceContextPropagator {
  propagator ??= new (require(coreModule) as typeof OpenTelemetryCore).W3CTraceContextPropagator();
  return propagator;
}

/**
 * A context whose span is the remote one a W3C traceparent names (a caller's, such as a CloudEvent's
 * distributed-tracing extension), to continue its trace; none when it is not a valid traceparent.
 * Parsed as the HTTP header is (found by an outside tester: an event's `01-…` traceparent began a
 * new trace, while the same value as an HTTP header was continued).
 */
export function remoteContextOf(traceparent: unknown, tracestate?: unknown): Context | undefined {
  if (typeof traceparent !== "string") return undefined;
  // The vendors' entries go on with the trace (W3C Trace Context §3.3), as an HTTP tracestate does.
  const carrier: Record<string, string> = { traceparent };
  if (typeof tracestate === "string" && tracestate.trim() !== "") carrier.tracestate = tracestate;
  const extracted = w3c().extract(ROOT_CONTEXT, carrier, defaultTextMapGetter);
  const spanContext = trace.getSpanContext(extracted);
  return spanContext && isSpanContextValid(spanContext) ? extracted : undefined;
}

/** The span context named by a traceparent, to link to it. */
export function spanContextOf(traceparent: string | undefined): SpanContext | undefined {
  return traceparent === undefined
    ? undefined
    : trace.getSpanContext(remoteContextOf(traceparent) ?? ROOT_CONTEXT);
}
