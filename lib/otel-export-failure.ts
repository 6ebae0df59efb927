import { redactUrl } from "./redact-url.ts";

/**
 * An export failure as a person can act on it: the reason, the URL the spans were sent to (its
 * password and query values redacted), and a hint for the usual mistakes (found by an outside
 * tester: a wrong path said only "Not Found", an ftp:// endpoint `Expected "https:"`).
 */
export function exportFailure(
  said: unknown[],
  env: NodeJS.ProcessEnv = process.env,
): { reason: string; url: string; hint?: string } {
  const parts = said.map(errorOf);
  const url = tracesUrl(env);
  const protocol = parts.find((part) => part.code === "ERR_INVALID_PROTOCOL");
  if (protocol) {
    const scheme = /Protocol "([^"]*)"/.exec(protocol.message)?.[1] ?? new URL(url).protocol;
    return {
      reason: `the OTLP endpoint must be an http:// or https:// URL, not ${scheme}//`,
      url: redactUrl(url),
    };
  }
  const reason = parts
    .map((part) => part.message)
    .join(" ")
    .slice(0, 500);
  const notFound = parts.some((part) => part.code === "404");
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  const hint =
    notFound &&
    !env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() &&
    base &&
    /\/v1\/traces\/?$/.test(pathOf(base))
      ? "OTEL_EXPORTER_OTLP_ENDPOINT is the collector's base URL: the SDK appends /v1/traces to it. Leave /v1/traces out, or give the whole URL as OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"
      : undefined;
  return { reason, url: redactUrl(url), ...(hint ? { hint } : {}) };
}

/** Where the SDK sends spans, by the OTEL_* variables (as @opentelemetry/otlp-exporter-base reads them). */
function tracesUrl(env: NodeJS.ProcessEnv): string {
  const grpc =
    (
      env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim()
    )?.toLowerCase() === "grpc";
  const specific = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim();
  if (specific && URL.canParse(specific)) return specific;
  const base = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (base && URL.canParse(base)) return grpc ? base : `${base.endsWith("/") ? base : `${base}/`}v1/traces`;
  return grpc ? "http://localhost:4317" : "http://localhost:4318/v1/traces";
}

const pathOf = (url: string) => (URL.canParse(url) ? new URL(url).pathname : url);

/** The message (and code) of an error, also of one OpenTelemetry's error handler wrote out as JSON. */
function errorOf(value: unknown): { message: string; code?: string } {
  const codeOf = (error: { code?: unknown }) =>
    error.code === undefined || error.code === null ? undefined : String(error.code);
  if (value instanceof Error) return { message: value.message, code: codeOf(value as { code?: unknown }) };
  const text = String(value);
  if (!text.startsWith("{")) return { message: text };
  try {
    const parsed = JSON.parse(text) as { message?: unknown; code?: unknown };
    return typeof parsed.message === "string"
      ? { message: parsed.message, code: codeOf(parsed) }
      : { message: text };
  } catch {
    return { message: text };
  }
}

/** The message of an error, also of one OpenTelemetry's error handler wrote out as JSON. */
export function reasonOf(value: unknown): string {
  return errorOf(value).message;
}
