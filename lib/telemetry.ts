import { setTimeout as delay } from "node:timers/promises";
import type { NodeSDK } from "@opentelemetry/sdk-node";
import type { Logger } from "./log.ts";
import { otelEnumsInLowerCase, withOtelEnumsInLowerCase } from "./otel-enums.ts";
import { exportFailure, reasonOf } from "./otel-export-failure.ts";
import { settingsIgnored } from "./otel-settings.ts";
import { redactUrl } from "./redact-url.ts";

/**
 * How long a shutdown waits for the last spans to be exported. A collector that accepts the
 * connection and never answers would otherwise hold the exit for the exporter's own timeout (10 s
 * by default), eating into a pod's termination grace.
 */
const flushLimitMs = 2_000;

/** Export failures are told at most this often: a collector that is down fails every batch. */
const failureLogEveryMs = 60_000;

let leftBehind = false;

/**
 * Whether a shutdown gave up on spans still being exported: the exporter's connection to the
 * collector is all that keeps the process alive then, so it exits at once.
 */
export const spansLeftBehind = () => leftBehind;

export interface Telemetry {
  /**
   * Flushes what is left, for at most `flushLimitMs`; false when spans were left behind. Called
   * again, it answers as the first call did (it flushes once).
   */
  shutdown(): Promise<boolean>;
}

/**
 * Starts the OpenTelemetry SDK when the standard OTEL_* variables ask for it
 * (an exporter endpoint or OTEL_TRACES_EXPORTER); otherwise tracing stays a
 * no-op and costs nothing on the request path. Export failures are logged (a wrong endpoint or a
 * collector that is down was silent, found by an outside tester), at most once a minute; a setting
 * the SDK could not use is logged at start, once per variable, apart from them.
 */
export async function startTelemetry(serviceName: string, log: Logger): Promise<Telemetry> {
  // Names and booleans in any case, as the specification reads them (lib/otel-enums.ts).
  const env = { ...process.env, ...otelEnumsInLowerCase(process.env) };
  const wanted =
    env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (env.OTEL_TRACES_EXPORTER && env.OTEL_TRACES_EXPORTER.trim() !== "none");
  // OTEL_TRACES_EXPORTER=none turns tracing off, also beside an endpoint (the SDK would start only
  // to say it will not trace).
  const off = env.OTEL_SDK_DISABLED?.trim() === "true" || env.OTEL_TRACES_EXPORTER?.trim() === "none";
  if (!wanted || off) return { shutdown: async () => true };
  const [{ NodeSDK: SDK }, { context, diag, DiagLogLevel, ROOT_CONTEXT }] = await Promise.all([
    import("@opentelemetry/sdk-node"),
    import("@opentelemetry/api"),
  ]);
  // OTEL_LOG_LEVEL set: the SDK's own console logger, as its users expect.
  let starting = true;
  const settings: string[] = [];
  if (!process.env.OTEL_LOG_LEVEL) {
    // Outside any request's context: the log line belongs to no request's trace.
    const told = throttled(log);
    // What the SDK says while it reads its settings is about a setting, not an export (a bad
    // OTEL_EXPORTER_OTLP_TIMEOUT was told as a failed export, and its line used up the minute's
    // one export failure, hiding the real one: found by an outside tester).
    const warn = (message: string, ...args: unknown[]) => {
      if (starting) settings.push([message, ...args].map(reasonOf).join(" "));
      else context.with(ROOT_CONTEXT, () => told(message, ...args));
    };
    const quiet = () => {};
    diag.setLogger({ error: warn, warn, info: quiet, debug: quiet, verbose: quiet }, DiagLogLevel.WARN);
  }
  // Snooze's name only where the variables name no service. Given to the SDK, not written to
  // process.env: every engine Snooze starts inherits that, and a vLLM tracing with
  // `--otlp-traces-endpoint` then sent its spans as Snooze's service (found in review).
  const sdk: NodeSDK = withOtelEnumsInLowerCase(process.env, () => {
    const made = new SDK(namesService(process.env) ? {} : { serviceName });
    made.start();
    return made;
  });
  starting = false;
  for (const ignored of settingsIgnored(settings)) log.warn("OpenTelemetry setting ignored", { ...ignored });
  // A flush given up on rejects later (the span processor's own timeout); the spans are lost
  // either way, and the rejection must not end the process with a stack trace.
  const flush = () =>
    sdk.shutdown().then(
      () => true,
      () => true,
    );
  const shutdown = async () => {
    const flushed = await Promise.race([flush(), delay(flushLimitMs, false, { ref: false })]);
    if (!flushed) {
      leftBehind = true;
      log.warn("spans still queued were not exported within 2 s and are lost", {
        endpoint: redactUrl(
          process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT || process.env.OTEL_EXPORTER_OTLP_ENDPOINT || "",
        ),
      });
    }
    return flushed;
  };
  let shuttingDown: Promise<boolean> | undefined;
  return {
    shutdown() {
      shuttingDown ??= shutdown();
      return shuttingDown;
    },
  };
}

/** OpenTelemetry's warnings and errors as Snooze's warnings: the first at once, then one a minute. */
function throttled(log: Logger): (message: string, ...args: unknown[]) => void {
  let lastAt = Number.NEGATIVE_INFINITY;
  let since = 0;
  return (message, ...args) => {
    const now = Date.now();
    if (now - lastAt < failureLogEveryMs) {
      since++;
      return;
    }
    lastAt = now;
    log.warn("OpenTelemetry could not export spans", {
      ...exportFailure([message, ...args]),
      ...(since > 0 ? { repeated: since } : {}),
    });
    since = 0;
  };
}

/**
 * Whether the environment names the service: `OTEL_SERVICE_NAME`, or `service.name` in
 * `OTEL_RESOURCE_ATTRIBUTES` (empty values count as unset, as OpenTelemetry reads them).
 */
export function namesService(env: NodeJS.ProcessEnv): boolean {
  if (env.OTEL_SERVICE_NAME?.trim()) return true;
  return (env.OTEL_RESOURCE_ATTRIBUTES ?? "").split(",").some((pair) => {
    const at = pair.indexOf("=");
    return at > 0 && pair.slice(0, at).trim() === "service.name" && pair.slice(at + 1).trim() !== "";
  });
}
