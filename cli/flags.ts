import { type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { parseDuration } from "../lib/duration.ts";

/** `--host` and `--port` as every server command takes them. */
export function listenFlags(defaultPort: number): Record<"host" | "port", Flag> {
  return {
    host: { type: "string", default: "127.0.0.1", description: "address to listen on" },
    port: { type: "string", short: "p", default: String(defaultPort), description: "port to listen on" },
  };
}

/** The value of a port flag, or a usage error naming it. */
export function portValue(values: FlagValues, name = "port"): number {
  const port = Number(values[name]);
  if (!Number.isInteger(port) || port < 0 || port > 65_535) {
    throw new UsageError(`--${name} must be a port number, not "${values[name]}"`);
  }
  return port;
}

/** The value of a duration flag in ms, or a usage error naming it; `positive` refuses 0. */
export function durationValue(values: FlagValues, name: string, { positive = false } = {}): number {
  const ms = parseDuration(String(values[name]));
  if (ms === undefined || (positive && ms <= 0)) {
    throw new UsageError(`--${name} must be a duration like 30s or 720h, not "${values[name]}"`);
  }
  return ms;
}
