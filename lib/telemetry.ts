import { setTimeout as delay } from "node:timers/promises";
import type { NodeSDK } from "@opentelemetry/sdk-node";

/**
 * How long a shutdown waits for the last spans to be exported. A collector that accepts the
 * connection and never answers would otherwise hold the exit for the exporter's own timeout (10 s
 * by default), eating into a pod's termination grace.
 */
const flushLimitMs = 2_000;

/**
 * Starts the OpenTelemetry SDK when the standard OTEL_* variables ask for it
 * (an exporter endpoint or OTEL_TRACES_EXPORTER); otherwise tracing stays a
 * no-op and costs nothing on the request path. Its `shutdown` flushes what is left, for at most
 * `flushLimitMs`.
 */
export async function startTelemetry(serviceName: string): Promise<{ shutdown(): Promise<void> }> {
  const wanted =
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (process.env.OTEL_TRACES_EXPORTER && process.env.OTEL_TRACES_EXPORTER !== "none");
  if (!wanted || process.env.OTEL_SDK_DISABLED === "true") return { shutdown: async () => {} };
  // An empty value is as good as none (OpenTelemetry treats empty variables as unset).
  if (!process.env.OTEL_SERVICE_NAME) process.env.OTEL_SERVICE_NAME = serviceName;
  const { NodeSDK: SDK } = await import("@opentelemetry/sdk-node");
  const sdk: NodeSDK = new SDK({});
  sdk.start();
  // A flush given up on rejects later (the span processor's own timeout); the spans are lost
  // either way, and the rejection must not end the process with a stack trace.
  const flush = () => sdk.shutdown().catch(() => {});
  return { shutdown: () => Promise.race([flush(), delay(flushLimitMs, undefined, { ref: false })]) };
}
