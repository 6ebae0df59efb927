import { isIP } from "node:net";
import { CommandFailure, type Flag, type FlagValues, UsageError } from "../lib/cli-flags.ts";
import { formatDuration, longestTimer, maxTimerMs, parseDuration } from "../lib/duration.ts";

/** `--host` and `--port` as every server command takes them. */
export function listenFlags(defaultPort: number): Record<"host" | "port", Flag> {
  return {
    host: { type: "string", default: "127.0.0.1", description: "address to listen on" },
    port: {
      type: "string",
      short: "p",
      default: String(defaultPort),
      description: "port to listen on (0: any free port)",
    },
  };
}

/**
 * The value of `--host`, or a usage error naming it. An IPv6 address may be written in brackets, as
 * a URL writes it (`[::1]`), and is taken without them: the loopback check read `[::1]` as `::1`, and
 * the listen then looked the bracketed name up (`getaddrinfo ENOTFOUND [::1]`, exit 1; found by an
 * outside tester). Empty is refused: Node listens on every interface for it, which nobody writing
 * `--host "$HOST"` with HOST unset meant (and the URL logged was `http://:8080`).
 */
export function hostValue(values: FlagValues): string {
  const text = String(values.host);
  if (text === "")
    throw new UsageError(
      '--host is empty: name the address to listen on (127.0.0.1; 0.0.0.0 or "::" for every interface)',
    );
  const bracketed = /^\[(.*)\]$/.exec(text)?.[1];
  if (bracketed === undefined) return text;
  if (isIP(bracketed) !== 6)
    throw new UsageError(
      `--host ${text}: only an IPv6 address is written in brackets (as in a URL), not ${bracketed || '""'}`,
    );
  return bracketed;
}

/**
 * A server's listen that failed, as one line naming the address and the flag to change, as
 * `snooze serve` says it; undefined for an error that is not a listen's. Found by an outside tester:
 * a port in use (or `--grpc-port` equal to `--port`) ended `snooze activator`, `autoscaler` and
 * `webhooks` with Node's stack trace.
 */
export function listenFailure(
  error: unknown,
  host: string,
  port: number,
  flag = "--port",
): CommandFailure | undefined {
  const { code, syscall, message } = error as NodeJS.ErrnoException;
  // gRPC's bind says it only in its message: "No address added ... [listen EADDRINUSE: ...]".
  const inUse = code === "EADDRINUSE" || /\bEADDRINUSE\b/.test(String(message));
  if (!inUse && syscall !== "listen" && syscall !== "getaddrinfo") return undefined;
  const address = host.includes(":") ? `[${host}]:${port}` : `${host}:${port}`;
  return new CommandFailure(
    `cannot listen on ${address}: ${inUse ? `the port is in use (pass another ${flag})` : message}`,
  );
}

/**
 * The ports the Fetch standard blocks (https://fetch.spec.whatwg.org/#bad-port): browsers, Node's
 * `fetch` and the clients built on it (OpenAI's Node SDK, `snooze status`) will not connect to them.
 */
const fetchBlockedPorts = new Set([
  1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104,
  109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515,
  526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049,
  3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6679, 6697, 10080,
]);

/**
 * The value of a port flag, or a usage error naming it: decimal digits only, 1 to 65535, or 0 for
 * any free port. `Number()` alone took `0x4650` (port 18000), `1e4` and `" 18104"` (found by an
 * outside tester). `fetched`: clients reach the port with `fetch` (the OpenAI API, the status page,
 * the admin API), so one that fetch blocks is refused too: Snooze served on `--port 1` while
 * `snooze status` said it could not reach it ("bad port (is Snooze running?)", found by an outside
 * tester).
 */
export function portValue(values: FlagValues, name = "port", { fetched = false } = {}): number {
  const text = String(values[name]);
  const port = /^\d{1,5}$/.test(text) ? Number(text) : Number.NaN;
  if (!(port <= 65_535)) {
    throw new UsageError(
      `--${name} must be a port number, 1 to 65535 in decimal digits (0: any free port), not "${text}"`,
    );
  }
  if (fetched && fetchBlockedPorts.has(port))
    throw new UsageError(
      `--${name} ${port} is a port that browsers and fetch will not connect to (the Fetch standard's bad ports), so OpenAI's Node SDK, the status page and \`snooze status\` could not reach Snooze: choose another`,
    );
  return port;
}

/**
 * The value of a duration flag in ms, or a usage error naming it: every command's duration flags
 * (and `snooze sim`'s) are read here. `positive` refuses 0, `atLeastMs` anything shorter. A duration
 * arms a timer, so it may be no longer than a timer waits (`maxTimerMs`, as in the settings file: a
 * longer timer fires after 1 ms); `timer: false` lifts that for one that is only written down, such
 * as a certificate's lifetime.
 */
export function durationValue(
  values: FlagValues,
  name: string,
  {
    positive = false,
    atLeastMs = 0,
    timer = true,
  }: { positive?: boolean; atLeastMs?: number; timer?: boolean } = {},
): number {
  const text = String(values[name]);
  const ms = parseDuration(text);
  if (ms === undefined)
    throw new UsageError(`--${name} must be a duration like 250ms, 30s, 5m or 1h30m, not "${text}"`);
  if (timer && ms > maxTimerMs)
    throw new UsageError(`--${name} is too long: at most ${longestTimer}, not "${text}"`);
  if (positive && ms <= 0) throw new UsageError(`--${name} must be longer than 0, not "${text}"`);
  // A timer waits whole milliseconds: less than one would be no time at all.
  if (positive && ms < 1) throw new UsageError(`--${name} must be at least 1ms, not "${text}"`);
  if (ms < atLeastMs)
    throw new UsageError(`--${name} must be at least ${formatDuration(atLeastMs)}, not "${text}"`);
  return ms;
}
