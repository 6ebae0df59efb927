import { setTimeout as delay } from "node:timers/promises";
import type { NodeSDK } from "@opentelemetry/sdk-node";
import type { Logger } from "./log.ts";
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
  const wanted =
    process.env.OTEL_EXPORTER_OTLP_ENDPOINT ||
    process.env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ||
    (process.env.OTEL_TRACES_EXPORTER && process.env.OTEL_TRACES_EXPORTER !== "none");
  // OTEL_TRACES_EXPORTER=none turns tracing off, also beside an endpoint (the SDK would start only
  // to say it will not trace).
  const off = process.env.OTEL_SDK_DISABLED === "true" || process.env.OTEL_TRACES_EXPORTER?.trim() === "none";
  if (!wanted || off) return { shutdown: async () => true };
  // An empty value is as good as none (OpenTelemetry treats empty variables as unset).
  if (!process.env.OTEL_SERVICE_NAME) process.env.OTEL_SERVICE_NAME = serviceName;
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
  const sdk: NodeSDK = new SDK({});
  sdk.start();
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
    (env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL?.trim() || env.OTEL_EXPORTER_OTLP_PROTOCOL?.trim()) === "grpc";
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
function reasonOf(value: unknown): string {
  return errorOf(value).message;
}

export interface SettingIgnored {
  /** The OTEL_* variable, when the SDK's words name it or the value it complained of. */
  variable?: string;
  value?: string;
  /** What the SDK uses instead. */
  using?: string;
  /** The SDK's own words, when they could not be told as a variable and its replacement. */
  reason?: string;
}

/** The SDK's defaults for settings it reports only as "using defaults". */
const defaults: Record<string, string> = {
  OTEL_EXPORTER_OTLP_TIMEOUT: "10000 (ms, the default)",
  OTEL_EXPORTER_OTLP_TRACES_TIMEOUT: "10000 (ms, the default)",
  OTEL_BSP_SCHEDULE_DELAY: "5000 (ms, the default)",
  OTEL_BSP_EXPORT_TIMEOUT: "30000 (ms, the default)",
  OTEL_BSP_MAX_QUEUE_SIZE: "2048 (the default)",
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "512 (the default)",
  OTEL_TRACES_SAMPLER: "parentbased_always_on (the default)",
  OTEL_EXPORTER_OTLP_COMPRESSION: "none (the default)",
  OTEL_EXPORTER_OTLP_TRACES_COMPRESSION: "none (the default)",
};

/** The names each list setting knows; the others are dropped. */
const known: Record<string, { names: string[]; none: string }> = {
  OTEL_PROPAGATORS: {
    names: ["tracecontext", "baggage", "b3", "b3multi"],
    none: "none: no trace context is read from requests or sent on",
  },
  OTEL_TRACES_EXPORTER: { names: ["otlp", "zipkin", "console"], none: "none: no spans are exported" },
};

/**
 * The SDK's complaints while it read its settings, one per variable: which variable, its value, and
 * what is used instead. The SDK tells some several times (the metrics, traces and logs exporters
 * each read OTEL_EXPORTER_OTLP_PROTOCOL), and names some only by their value.
 */
export function settingsIgnored(messages: string[], env: NodeJS.ProcessEnv = process.env): SettingIgnored[] {
  const byVariable = new Map<string, SettingIgnored>();
  const unnamed: SettingIgnored[] = [];
  for (const message of messages) {
    const variable = variableOf(message, env);
    if (!variable) {
      if (!unnamed.some((told) => told.reason === message)) unnamed.push({ reason: message.slice(0, 500) });
      continue;
    }
    const told = byVariable.get(variable) ?? { variable, value: env[variable] };
    told.using ??= usingOf(variable, message, env);
    byVariable.set(variable, told);
  }
  for (const told of byVariable.values()) told.using ??= "its default";
  return [...byVariable.values(), ...unnamed];
}

function variableOf(message: string, env: NodeJS.ProcessEnv): string | undefined {
  const named = /\b(OTEL_[A-Z0-9_]+)\b/.exec(message)?.[1];
  if (named) return named;
  if (/^Propagator "/.test(message)) return "OTEL_PROPAGATORS";
  if (/trace exporter/i.test(message)) return "OTEL_TRACES_EXPORTER";
  // Named only by its value ("Unsupported OTLP traces protocol: carrier-pigeon"): the variable
  // whose value it quotes, the signal's own before the shared one.
  const holding = Object.entries(env)
    .filter(([name, value]) => name.startsWith("OTEL_") && value && quotes(message, value))
    .sort(([a, x], [b, y]) => (y?.length ?? 0) - (x?.length ?? 0) || b.length - a.length);
  return holding[0]?.[0];
}

/** Whether `message` holds `value` as a word of its own (quoted, or between spaces and stops). */
function quotes(message: string, value: string): boolean {
  for (let at = message.indexOf(value); at >= 0; at = message.indexOf(value, at + 1)) {
    const before = message[at - 1] ?? " ";
    const after = message[at + value.length] ?? " ";
    if (/[\s"'(:=]/.test(before) && /[\s"'),.]/.test(after)) return true;
  }
  return false;
}

function usingOf(variable: string, message: string, env: NodeJS.ProcessEnv): string | undefined {
  const list = known[variable];
  if (list) {
    const kept = (env[variable] ?? "")
      .split(",")
      .map((name) => name.trim())
      .filter((name) => list.names.includes(name));
    return kept.length > 0 ? [...new Set(kept)].join(",") : list.none;
  }
  const said = /(?:using|defaulting to|falling back to)\s+(.+?)\.?$/i.exec(message)?.[1];
  if (said && !/^(the )?defaults?$|^undefined$/i.test(said)) return said;
  return defaults[variable];
}
