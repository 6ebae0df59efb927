/**
 * The OpenTelemetry SDK's complaints about its OTEL_* settings, as Snooze logs them ("OpenTelemetry
 * setting ignored"): apart from export failures, which lib/otel-export-failure.ts words.
 */

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
function quotes(said: string, set: string): boolean {
  // In any case: the SDK is given the names in lower case (lib/otel-enums.ts).
  const message = said.toLowerCase();
  const value = set.toLowerCase();
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
      .map((name) => name.trim().toLowerCase())
      .filter((name) => list.names.includes(name));
    return kept.length > 0 ? [...new Set(kept)].join(",") : list.none;
  }
  const said = /(?:using|defaulting to|falling back to)\s+(.+?)\.?$/i.exec(message)?.[1];
  if (said && !/^(the )?defaults?$|^undefined$/i.test(said)) return said;
  return defaults[variable];
}
