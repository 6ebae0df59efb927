import { boundedWriter } from "./bounded-writer.ts";
import { escapeLineBreakers } from "./json-line.ts";
import { LogLimiter } from "./log-limit.ts";

/**
 * Structured logs: one JSON object a line on stderr, so stdout stays free for
 * command output and any log shipper can parse them. A line written inside a
 * traced operation carries its `trace_id` and `span_id`, so logs and traces join.
 *
 * The span lookup is registered by lib/tracing.ts (`setTraceIdSource`) rather than imported here:
 * every process that makes spans loads lib/tracing.ts, and one that makes none (each `snooze sim`
 * engine) then does not load OpenTelemetry's API at all (issue 14: idle RSS).
 */
export type Level = "debug" | "info" | "warn" | "error";
const order: Record<Level, number> = { debug: 10, info: 20, warn: 30, error: 40 };

export interface Logger {
  debug(msg: string, fields?: Record<string, unknown>): void;
  info(msg: string, fields?: Record<string, unknown>): void;
  warn(msg: string, fields?: Record<string, unknown>): void;
  error(msg: string, fields?: Record<string, unknown>): void;
  child(fields: Record<string, unknown>): Logger;
}

let unknownLevelTold = false;

/**
 * What stderr may hold queued before lines are dropped: far above what a reader that keeps up leaves
 * there (a pipe takes 64 KiB before Node queues), far below what a process should spend on lines
 * no one reads.
 */
const maxQueuedLogChars = 8 * 1024 * 1024;

let stderrWriter: ((line: string) => void) | undefined;

/** Every logger's default: stderr, bounded (lib/bounded-writer.ts); one for the process. */
function toStderr(line: string): void {
  stderrWriter ??= boundedWriter(process.stderr, maxQueuedLogChars, droppedLine);
  stderrWriter(line);
}

const droppedLine = (dropped: number) =>
  `${serialize({ time: new Date().toISOString(), level: "warn", msg: "log lines dropped: stderr was not read as fast as they came", dropped })}\n`;

/**
 * `SNOOZE_LOG_LEVEL` in any case (`DEBUG` too); one that names no level is said once, then info is
 * used (found by an outside tester: `DEBUG` and `verbose` gave info without a word, and `toString`,
 * a key of every object, passed as a level and logged everything).
 */
export function envLevel(
  value = process.env.SNOOZE_LOG_LEVEL,
  write: (line: string) => void = toStderr,
): Level {
  if (value === undefined || value === "") return "info";
  const level = value.toLowerCase();
  if (Object.hasOwn(order, level)) return level as Level;
  if (!unknownLevelTold) {
    unknownLevelTold = true;
    const time = new Date().toISOString();
    write(
      `${serialize({ time, level: "warn", msg: `SNOOZE_LOG_LEVEL is not a log level (${Object.keys(order).join(", ")}); logging at info`, value })}\n`,
    );
  }
  return "info";
}

/**
 * A logger writing to `write` at `minimum` and above. Its warnings and errors, and its children's,
 * go through one `limiter`: a kind of line (its message and model) that comes faster than the limit
 * is counted, not written, past the first lines, and told in one line when the interval ends
 * (lib/log-limit.ts). Debug and info lines are not limited: they tell what Snooze does, at its pace.
 */
export function createLogger(
  base: Record<string, unknown> = {},
  write: (line: string) => void = toStderr,
  minimum: Level = envLevel(),
  limiter: LogLimiter = new LogLimiter(),
): Logger {
  const emit = (level: Level, msg: string, fields?: Record<string, unknown>) => {
    if (order[level] < order[minimum]) return;
    if (level === "warn" || level === "error") {
      const model = fields?.model ?? base.model;
      const kind = `${level}\0${msg}\0${model === undefined ? "" : String(model)}`;
      const told = (suppressed: number, mixed: boolean) =>
        writeSuppressed(level, msg, model, suppressed, mixed);
      if (!limiter.admit(kind, told)) return;
    }
    const time = new Date().toISOString();
    const record = { time, level, msg, ...traceIds(), ...base, ...fields };
    // A field named like the line's own keys does not overwrite them (a sleep's `level` was read as
    // the log level); the keys keep their place first in the line.
    Object.assign(record, { time, level, msg });
    write(`${serialize(record)}\n`);
  };
  /**
   * The lines of a kind held back in an interval, in one line of that kind's level; `mixed`: of the
   * kinds that came while too many others were counted, so no one message or model.
   */
  const writeSuppressed = (level: Level, msg: string, model: unknown, suppressed: number, mixed: boolean) => {
    const time = new Date().toISOString();
    const line = mixed
      ? `log lines of many kinds: ${suppressed} suppressed`
      : `${msg}: ${suppressed} more suppressed`;
    const seconds = limiter.limit.intervalMs / 1000;
    const { model: _, ...rest } = base;
    const record = {
      time,
      level,
      msg: line,
      ...rest,
      ...(mixed || model === undefined ? {} : { model }),
      suppressed,
      seconds,
    };
    Object.assign(record, { time, level, msg: line });
    write(`${serialize(record)}\n`);
  };
  return {
    debug: (msg, fields) => emit("debug", msg, fields),
    info: (msg, fields) => emit("info", msg, fields),
    warn: (msg, fields) => emit("warn", msg, fields),
    error: (msg, fields) => emit("error", msg, fields),
    child: (fields) => createLogger({ ...base, ...fields }, write, minimum, limiter),
  };
}

/** The active span's ids (W3C hex, as OpenTelemetry's log data model names them), if any. */
export type TraceIdSource = () => { trace_id?: string; span_id?: string };

let traceIds: TraceIdSource = () => ({});

/** Sets where log lines find the active span's ids (lib/tracing.ts, when it loads). */
export function setTraceIdSource(source: TraceIdSource): void {
  traceIds = source;
}

/**
 * The line's JSON. A field JSON cannot hold (a BigInt, an object that refers to itself) costs that
 * line its fields, not the caller an exception: a logger that throws turned a failure being told
 * into another one.
 */
function serialize(record: Record<string, unknown>): string {
  let json: string;
  try {
    json = JSON.stringify(record, errorReplacer);
  } catch (error) {
    const { time, level, msg } = record;
    json = JSON.stringify({ time, level, msg, unwritable: (error as Error).message });
  }
  // One line to every reader of lines, whatever a field holds (an engine's last words).
  return escapeLineBreakers(json);
}

/** How deep an error's causes are followed: far enough for fetch's `fetch failed` → the socket's. */
const causesShown = 3;

/**
 * An error as its name and message, with its system `code` (`ECONNREFUSED` ...) and its `cause`
 * (found by an outside tester: a fetch that failed was logged as `fetch failed`, its reason, the
 * refused or reset connection, only in the cause left out).
 */
function errorReplacer(_key: string, value: unknown) {
  return value instanceof Error ? errorFields(value, causesShown) : value;
}

function errorFields(error: Error, causes: number): Record<string, unknown> {
  const { code } = error as { code?: unknown };
  const { cause } = error;
  return {
    name: error.name,
    message: error.message,
    ...(typeof code === "string" || typeof code === "number" ? { code } : {}),
    ...(cause === undefined || causes === 0
      ? {}
      : { cause: cause instanceof Error ? errorFields(cause, causes - 1) : String(cause) }),
  };
}

/** A logger that drops everything, for tests and library callers that pass none. */
export const silentLogger: Logger = createLogger({}, () => {}, "error");
