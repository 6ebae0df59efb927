import type { NodeSDK } from "@opentelemetry/sdk-node";

/**
 * Starts the OpenTelemetry SDK when the standard OTEL_* variables ask for it
 * (an exporter endpoint or OTEL_TRACES_EXPORTER); otherwise tracing stays a
 * no-op and costs nothing on the request path.
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
  return { shutdown: () => sdk.shutdown() };
}
