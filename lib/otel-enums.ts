/**
 * The OTEL_* variables whose values are names from a fixed set (an exporter, a sampler, a
 * propagator, a protocol, a compression), a list of such names, or a boolean. OpenTelemetry's
 * specification asks that they be read in any case (`NONE`, `ParentBased_AlwaysOff`); its Node.js
 * SDK compares them as written, so `OTEL_TRACES_EXPORTER=NONE` started the SDK only to warn
 * "Unrecognized OTEL_TRACES_EXPORTER value: NONE" and `OTEL_TRACES_SAMPLER=ALWAYS_OFF` sampled
 * everything (found by an outside tester).
 */
const enumVariables = [
  "OTEL_SDK_DISABLED",
  "OTEL_TRACES_EXPORTER",
  "OTEL_METRICS_EXPORTER",
  "OTEL_LOGS_EXPORTER",
  "OTEL_PROPAGATORS",
  "OTEL_TRACES_SAMPLER",
  "OTEL_EXPORTER_OTLP_PROTOCOL",
  "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
  "OTEL_EXPORTER_OTLP_METRICS_PROTOCOL",
  "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL",
  "OTEL_EXPORTER_OTLP_COMPRESSION",
  "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
  "OTEL_EXPORTER_OTLP_METRICS_COMPRESSION",
  "OTEL_EXPORTER_OTLP_LOGS_COMPRESSION",
  "OTEL_NODE_RESOURCE_DETECTORS",
];

/** The enum variables of `env` not in lower case, each with its value in lower case. */
export function otelEnumsInLowerCase(env: NodeJS.ProcessEnv): Record<string, string> {
  const lowered: Record<string, string> = {};
  for (const name of enumVariables) {
    const value = env[name];
    if (value !== undefined && value !== value.toLowerCase()) lowered[name] = value.toLowerCase();
  }
  return lowered;
}

/**
 * Runs `fn` (the SDK reading its settings) with the enum variables in lower case, then puts back
 * the values as set: every engine Snooze starts inherits `process.env`, and is given the variables
 * as its user wrote them.
 */
export function withOtelEnumsInLowerCase<T>(env: NodeJS.ProcessEnv, fn: () => T): T {
  const lowered = otelEnumsInLowerCase(env);
  const written = Object.keys(lowered).map((name) => [name, env[name]] as const);
  Object.assign(env, lowered);
  try {
    return fn();
  } finally {
    for (const [name, value] of written) env[name] = value;
  }
}
