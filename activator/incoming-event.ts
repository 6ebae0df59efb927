import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from "node:http";
import { context } from "@opentelemetry/api";
import type { CloudEventV1 } from "cloudevents";
import { clip } from "../lib/clip.ts";
import { decodeAttributeHeaders, repeatedAttributeHeader } from "../lib/cloudevents-header.ts";
import { cloudEvents } from "../lib/cloudevents-sdk.ts";
import { formatDuration, parseDuration } from "../lib/duration.ts";
import { BodyStalled, BodyTooLarge, type MinimumPace, readBody } from "../lib/http/body.ts";
import { refuseEncodedBody } from "../lib/http/content-encoding.ts";
import { sendContinue } from "../lib/http/continue.ts";
import { sendError } from "../lib/http/json.ts";
import { jsonText } from "../lib/http/json-encoding.ts";
import { tooDeepAt } from "../lib/json-nesting.ts";
import type { Logger } from "../lib/log.ts";
import { openAIError } from "../lib/openai-error.ts";
import { isRfc3339 } from "../lib/rfc3339.ts";
import { remoteContextOf } from "../lib/tracing.ts";
import { type AdminActions, AdminActionUnfinished, SleepStoppedInstead } from "./admin.ts";
import type { AdminRefusal } from "./admin-guard.ts";
import type { SenderCheck } from "./event-senders.ts";
import { knownModels } from "./unknown-model.ts";

/**
 * What an incoming CloudEvent asks of a model. `prewarm` wakes it now, ahead of traffic; its
 * `data.for` (a duration) says how long it should stay awake (see docs/events.md).
 */
export type EventVerb = "wake" | "prewarm" | "sleep" | "stop";

export const eventTypePrefix = "dev.snooze.model.";
export const eventTypes: readonly string[] = ["wake", "prewarm", "sleep", "stop"].map(
  (verb) => `${eventTypePrefix}${verb}`,
);

/** Knative's PingSource sends this type; the action is then its `snoozeaction` extension. */
export const pingType = "dev.knative.sources.ping";
export const actionExtension = "snoozeaction";

export interface EventCommand {
  verb: EventVerb;
  /** The model (id or alias) the event names in its subject or `data.model`. */
  model: string;
  /** Where the event names it (`param` of a refusal about it). */
  modelFrom: "subject" | "data.model";
  /** `data.model` when the subject names the model too, and it is written otherwise: it must be the same model. */
  dataModel?: string;
  /** For prewarm: how long the model is wanted awake (ms). */
  forMs?: number;
  /**
   * A digest of `source` + `id`, what makes a redelivery the same event: 43 characters however long
   * they are, since 10,000 are remembered (a 60 kB id was kept whole: 600 MB for a full window).
   */
  key: string;
  /** Its `source` and `id`, for the log (clipped: they may be long). */
  source: string;
  eventId: string;
  /** The event's distributed-tracing extension: the trace of whatever made the event. */
  traceparent?: string;
  /** The same extension's vendor entries, carried with its traceparent. */
  tracestate?: string;
}

/** Why an incoming message was refused: the status to answer and the reason. */
export interface EventRefusal {
  ok: false;
  status: number;
  code: string;
  message: string;
  /** The field the refusal is about, when it is one (OpenAI's `param`). */
  param?: string;
}

export type ParsedEvents =
  | { ok: true; mode: "binary" | "structured" | "batch"; commands: EventCommand[] }
  | EventRefusal;

/** The largest event (or batch) the endpoint reads; past it the answer is 413. */
export const maxEventSize = 64 * 1024;

/**
 * How deep objects and arrays may nest in an event (its data included). Snooze reads two levels
 * (`data.for`); the SDK's validator and `JSON.stringify` walk the event recursively, and overflowed
 * the stack on data nested a few thousand deep, which was answered 500 (which Knative retries).
 */
export const maxEventNesting = 64;

/** An event nested deeper than `maxEventNesting`, refused naming where. */
function tooDeep(event: unknown): EventRefusal | undefined {
  const at = tooDeepAt(event, maxEventNesting);
  return at === undefined
    ? undefined
    : refuse(
        `the event's ${at} nests objects and arrays more than ${maxEventNesting} deep; an event needs only a few levels`,
        "invalid_event",
        400,
        at,
      );
}

const refuse = (message: string, code = "invalid_event", status = 400, param?: string): EventRefusal => ({
  ok: false,
  status,
  code,
  message,
  ...(param ? { param } : {}),
});

const required = ["id", "source", "type"] as const;

/**
 * The attributes the spec defines, and the data, in the JSON format. Any other member is an
 * extension, whose value is a string, a number or a boolean: the SDK let an object or array pass,
 * and `snoozeaction: ["wake"]` read as a wake.
 */
const contextAttributes = new Set([
  "specversion",
  "id",
  "source",
  "type",
  "datacontenttype",
  "dataschema",
  "subject",
  "time",
  "data",
  "data_base64",
]);

/**
 * Reads the CloudEvents of one HTTP message (binary, structured or batch mode, the way a Knative
 * Trigger delivers them) with the `cloudevents` SDK and checks what the SDK lets pass: it fills in
 * a missing id or specversion and accepts 0.3, so the attributes the sender wrote (binary mode:
 * its ce-* headers percent-decoded, which the SDK does not do) are checked
 * first (specversion 1.0; id, source and type present), then the SDK's own schema validation, then
 * Snooze's types and data. `rawHeaders` (the request's) tell a ce-* header sent twice.
 */
export function parseIncomingEvents(
  received: IncomingHttpHeaders,
  body: Buffer,
  rawHeaders: readonly string[] = [],
): ParsedEvents {
  const contentType = String(received["content-type"] ?? "").toLowerCase();
  // As an OpenAI request's body is read (RFC 8259 §8.1): a byte order mark (Windows' editors and
  // PowerShell write one) or UTF-16 is JSON too, not an "unexpected token" at position 0.
  const { text } = jsonText(body);
  if (contentType.startsWith("application/cloudevents-batch+json")) {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (error) {
      return refuse(`the batch is not valid JSON: ${(error as Error).message}`, "invalid_json");
    }
    if (!Array.isArray(raw)) return refuse("a batch must be a JSON array of events");
    // Nothing to act on is a mistake, not a success: the sender meant to send something.
    if (raw.length === 0) return refuse("the batch is empty: send at least one event");
    const commands: EventCommand[] = [];
    for (const [index, item] of raw.entries()) {
      const parsed = structuredEvent(item);
      // Counted from 1, as people count: "event 2 of 3" is the second.
      if (!parsed.ok)
        return { ...parsed, message: `event ${index + 1} of ${raw.length} in the batch: ${parsed.message}` };
      commands.push(parsed.command);
    }
    return { ok: true, mode: "batch", commands };
  }
  if (contentType.startsWith("application/cloudevents+json")) {
    let raw: unknown;
    try {
      raw = JSON.parse(text);
    } catch (error) {
      return refuse(`the event is not valid JSON: ${(error as Error).message}`, "invalid_json");
    }
    const parsed = structuredEvent(raw);
    return parsed.ok ? { ok: true, mode: "structured", commands: [parsed.command] } : parsed;
  }
  const unread = unreadFormat(received);
  if (unread) return unread;
  if (!looksLikeCloudEvent(received)) return notACloudEvent();
  const repeated = repeatedAttributeHeader(rawHeaders);
  if (repeated)
    return refuse(
      `${repeated} is sent more than once: an attribute has one value, in one header`,
      "invalid_event",
      400,
      repeated,
    );
  const decoded = decodeAttributeHeaders(received);
  if (!decoded.ok)
    return refuse(
      `${decoded.header} is not percent-encoded UTF-8 (CloudEvents HTTP binding 3.1.3.2: a space, '"', '%' and anything outside printable ASCII go as %XX of its UTF-8 bytes)`,
      "invalid_event",
      400,
      decoded.header,
    );
  const headers = decoded.headers;
  // The SDK takes these as attributes, and Snooze read a ce-data_base64 header's JSON in place of
  // the body: the data a filter or log saw in the body was not what was acted on.
  const dataHeader = ["ce-data", "ce-data_base64"].find((name) => headers[name] !== undefined);
  if (dataHeader)
    return refuse(
      `${dataHeader} is no attribute: a binary-mode event's data is the body (data and data_base64 are members of a structured-mode event)`,
      "invalid_event",
      400,
      dataHeader,
    );
  // An empty subject names no model, as in structured mode (where the SDK lets it pass): the model
  // is then data.model, or the event is missing_model. The SDK's schema would refuse the header.
  if (headers["ce-subject"] === "") delete headers["ce-subject"];
  const specversion = headers["ce-specversion"];
  if (specversion === undefined)
    return refuse("the event has no ce-specversion header", "invalid_event", 400, "ce-specversion");
  if (specversion !== "1.0")
    return refuse(
      `specversion ${JSON.stringify(specversion)} is not supported; send 1.0`,
      "unsupported_specversion",
      400,
      "ce-specversion",
    );
  for (const name of required)
    if (!headers[`ce-${name}`])
      return refuse(`the event has no ce-${name} header`, "invalid_event", 400, `ce-${name}`);
  // The SDK replaces a time it cannot read with the current time: what the sender wrote is checked.
  if (headers["ce-time"] !== undefined && !isRfc3339(headers["ce-time"]))
    return refuse(
      `ce-time ${JSON.stringify(headers["ce-time"])} is not an RFC 3339 timestamp`,
      "invalid_event",
      400,
      "ce-time",
    );
  // A binary-mode event's content type is its data's: Snooze reads JSON data only (a form type was
  // refused before the body, with the admin API's other routes).
  const mediaType = contentType.split(";")[0]!.trim();
  if (body.length > 0 && mediaType !== "" && !isJsonMediaType(mediaType))
    return refuse(
      `The events endpoint reads a binary-mode event's data as JSON, not ${mediaType}: send the data as application/json (or no body), or the event as application/cloudevents+json`,
      "unsupported_media_type",
      415,
      "content-type",
    );
  // The data as sent: JSON read here (the SDK reads only application/json, and leaves text/json or
  // +json as text), or, with no content type, text that may hold JSON.
  let sent: SentData = {};
  if (body.length > 0 && mediaType === "") sent = { text, param: "data" };
  if (body.length > 0 && mediaType !== "") {
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (error) {
      return refuse(
        `the event's data is not valid JSON: ${(error as Error).message}`,
        "invalid_json",
        400,
        "data",
      );
    }
    // Counted as in structured mode, where the data is one level down in the event.
    const deep = tooDeep({ data });
    if (deep) return deep;
    sent = { value: data, param: "data" };
  }
  const parsed = fromSdk(
    () => cloudEvents().HTTP.toEvent({ headers, body: body.length > 0 ? text : undefined }),
    (name) => ({ param: `ce-${name}`, given: headers[`ce-${name}`] }),
    sent,
  );
  return parsed.ok ? { ok: true, mode: "binary", commands: [parsed.command] } : parsed;
}

/** JSON by its media type: application/json, text/json, or a structured syntax suffix (`+json`). */
function isJsonMediaType(mediaType: string): boolean {
  return mediaType === "application/json" || mediaType === "text/json" || mediaType.endsWith("+json");
}

/**
 * Structured or batch mode in another event format (XML, Avro, Protobuf ...) is a CloudEvent Snooze
 * cannot read: said so (before the body, from the headers), rather than read as binary mode and
 * refused for a missing ce-specversion.
 */
function unreadFormat(headers: IncomingHttpHeaders): EventRefusal | undefined {
  const contentType = String(headers["content-type"] ?? "")
    .split(";")[0]!
    .trim()
    .toLowerCase();
  if (
    !contentType.startsWith("application/cloudevents") ||
    contentType === "application/cloudevents+json" ||
    contentType === "application/cloudevents-batch+json"
  )
    return undefined;
  return refuse(
    `The events endpoint does not take content-type ${contentType}: it reads only the JSON event format. Send the event as application/cloudevents+json, a batch as application/cloudevents-batch+json, or a binary-mode event's data as application/json.`,
    "unsupported_media_type",
    415,
    "content-type",
  );
}

/** Whether the headers alone say a CloudEvent may follow: ce-* headers, or a CloudEvents content type. */
function looksLikeCloudEvent(headers: IncomingHttpHeaders): boolean {
  const contentType = String(headers["content-type"] ?? "").toLowerCase();
  return (
    contentType.startsWith("application/cloudevents") ||
    Object.keys(headers).some((name) => name.startsWith("ce-"))
  );
}

const notACloudEvent = () =>
  refuse(
    "not a CloudEvent: send ce-* headers (binary mode) or an application/cloudevents+json body (structured mode)",
    "not_a_cloudevent",
  );

/** Where a parsed JSON value holds a number too large for a double (`1e999`), as a dotted path. */
function nonFiniteAt(value: unknown, path = ""): string | undefined {
  if (typeof value === "number") return Number.isFinite(value) ? undefined : path;
  if (typeof value !== "object" || value === null) return undefined;
  for (const [key, item] of Object.entries(value)) {
    const found = nonFiniteAt(item, path ? `${path}.${key}` : key);
    if (found) return found;
  }
  return undefined;
}

function structuredEvent(raw: unknown): { ok: true; command: EventCommand } | EventRefusal {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw))
    return refuse("an event must be a JSON object");
  const attributes = raw as Record<string, unknown>;
  const deep = tooDeep(attributes);
  if (deep) return deep;
  // The event goes to the SDK as JSON again, where Infinity would become null: said here instead.
  const tooLarge = nonFiniteAt(attributes);
  if (tooLarge)
    return refuse(
      `the event's ${tooLarge} is a JSON number too large for a double (read as Infinity)`,
      "invalid_event",
      400,
      tooLarge,
    );
  if (attributes.specversion === undefined)
    return refuse("the event has no specversion", "invalid_event", 400, "specversion");
  // A JSON number is not the attribute's type (and 1.0 reads back as 1): a malformed event, not
  // another version.
  if (typeof attributes.specversion !== "string")
    return refuse(
      `the event's specversion must be the string "1.0", not ${JSON.stringify(attributes.specversion)} (a JSON ${typeof attributes.specversion}): write "specversion": "1.0"`,
      "invalid_event",
      400,
      "specversion",
    );
  if (attributes.specversion !== "1.0")
    return refuse(
      `specversion ${JSON.stringify(attributes.specversion)} is not supported; send 1.0`,
      "unsupported_specversion",
      400,
      "specversion",
    );
  for (const name of required) {
    const value = attributes[name];
    if (value === undefined || value === "")
      return refuse(`the event has no ${name}`, "invalid_event", 400, name);
    if (typeof value !== "string")
      return refuse(
        `the event's ${name} must be a string, not ${JSON.stringify(value)}`,
        "invalid_event",
        400,
        name,
      );
  }
  const extension = Object.entries(attributes).find(
    ([name, value]) => !contextAttributes.has(name) && typeof value === "object" && value !== null,
  );
  if (extension)
    return refuse(
      `the event's extension ${extension[0]} must be a string, a number or a boolean (an attribute holds one value), not a JSON ${Array.isArray(extension[1]) ? "array" : "object"}`,
      "invalid_event",
      400,
      extension[0],
    );
  // Checked as the sender wrote it: the SDK decodes anything leniently (and keeps both).
  if (attributes.data_base64 !== undefined) {
    if (attributes.data !== undefined)
      return refuse("an event has data or data_base64, not both", "invalid_event", 400, "data_base64");
    if (typeof attributes.data_base64 !== "string" || !/^[A-Za-z0-9+/]*={0,2}$/.test(attributes.data_base64))
      return refuse("data_base64 is not base64", "invalid_event", 400, "data_base64");
  }
  if (attributes.time !== undefined && !isRfc3339(attributes.time))
    return refuse(
      `time ${JSON.stringify(attributes.time)} is not an RFC 3339 timestamp`,
      "invalid_event",
      400,
      "time",
    );
  return fromSdk(
    () =>
      cloudEvents().HTTP.toEvent({
        headers: { "content-type": "application/cloudevents+json" },
        body: JSON.stringify(raw),
      }),
    (name) => ({ param: name, given: attributes[name] }),
    structuredData(attributes),
  );
}

/**
 * A structured event's data as sent: `data_base64`'s bytes and a `data` string of a content type
 * other than JSON are text that may hold JSON; any other `data` is a JSON value (a string too: with
 * no `datacontenttype` the data is JSON, as the JSON event format says).
 */
function structuredData(attributes: Record<string, unknown>): SentData {
  if (typeof attributes.data_base64 === "string")
    return { text: jsonText(Buffer.from(attributes.data_base64, "base64")).text, param: "data_base64" };
  const contentType = attributes.datacontenttype;
  if (
    typeof attributes.data === "string" &&
    typeof contentType === "string" &&
    !isJsonMediaType(contentType.split(";")[0]!.trim().toLowerCase())
  )
    return { text: attributes.data, param: "data" };
  return attributes.data === undefined ? {} : { value: attributes.data, param: "data" };
}

/**
 * An event's data as the sender wrote it, as its mode and content type say, not as the SDK hands it
 * on (the SDK parses some JSON and leaves other as text, so a JSON string that held JSON text was
 * read twice: `"5"` was refused as a number, `"qwen"` as text that is not JSON): a JSON value, or
 * text that may hold JSON; `param` is where it was (`data`, `data_base64`). None: no data.
 */
type SentData =
  | { value: unknown; param: "data"; text?: undefined }
  | { text: string; param: "data" | "data_base64"; value?: undefined }
  | { value?: undefined; text?: undefined; param?: undefined };

/** Where an attribute is in the message (`param`), and the value the sender wrote. */
type AttributeOf = (name: string) => { param: string; given: unknown };

/** Builds the event with the SDK, validates it against the CloudEvents schema, and reads Snooze's command. */
function fromSdk(
  build: () => CloudEventV1<unknown> | CloudEventV1<unknown>[],
  attribute: AttributeOf,
  sent: SentData,
): { ok: true; command: EventCommand } | EventRefusal {
  let event: CloudEventV1<unknown>;
  try {
    const built = build();
    if (Array.isArray(built)) return refuse("expected one event, got a batch");
    event = built;
    (event as { validate?: () => boolean }).validate?.();
  } catch (error) {
    if (error instanceof cloudEvents().ValidationError) return schemaRefusal(error, attribute);
    return refuse(`the event could not be read: ${(error as Error).message}`);
  }
  return commandOf(event, sent);
}

/** One error of the SDK's schema validator (ajv), as far as it is read here. */
interface SchemaError {
  instancePath?: string;
  keyword?: string;
  params?: { format?: string; limit?: number };
  message?: string;
}

/**
 * The SDK's schema refusal in words: which attribute, what it must be, what was sent, and the
 * attribute in `param` (its ce-* header in binary mode), not the validator's JSON.
 */
function schemaRefusal(error: Error & { errors?: unknown[] | null }, attribute: AttributeOf): EventRefusal {
  const badName = /^invalid attribute name: "(.*)"$/.exec(error.message);
  if (badName)
    return refuse(
      `${JSON.stringify(badName[1])} is not a CloudEvents attribute name: use lowercase a-z and 0-9 only`,
      "invalid_event",
      400,
      attribute(badName[1]!).param,
    );
  const first = error.errors?.[0] as SchemaError | undefined;
  const name = first?.instancePath?.split("/")[1];
  if (!first || !name)
    return refuse(`the event is not a valid CloudEvent: ${error.message.replace(/\s+/g, " ")}`);
  const { param, given } = attribute(name);
  const rule =
    first.keyword === "type"
      ? "must be a string"
      : first.keyword === "minLength"
        ? "must not be empty"
        : first.keyword === "format" && first.params?.format === "uri"
          ? "must be an absolute URI, like https://example.com/schema.json"
          : first.keyword === "format" && first.params?.format === "uri-reference"
            ? "must be a URI reference, like /my/source"
            : (first.message ?? "is not valid");
  const sent = given === undefined || first.keyword === "minLength" ? "" : `, not ${JSON.stringify(given)}`;
  return refuse(`the event's ${name} ${rule}${sent}`, "invalid_event", 400, param);
}

function commandOf(
  event: CloudEventV1<unknown>,
  sent: SentData,
): { ok: true; command: EventCommand } | EventRefusal {
  // A PingSource cannot choose its events' type: it names the action in an extension instead.
  const action =
    event.type === pingType ? `${eventTypePrefix}${String(event[actionExtension] ?? "")}` : event.type;
  if (!eventTypes.includes(action)) {
    const given = event[actionExtension];
    return refuse(
      event.type !== pingType
        ? `unsupported event type ${JSON.stringify(event.type)}; Snooze takes ${eventTypes.join(", ")}, or ${pingType} with the extension ${actionExtension}`
        : given === undefined
          ? `a ${pingType} event needs the extension ${actionExtension} (wake, prewarm, sleep or stop)`
          : `the extension ${actionExtension} must be wake, prewarm, sleep or stop, not ${JSON.stringify(given)}`,
      "unsupported_event_type",
      400,
      event.type === pingType ? actionExtension : "type",
    );
  }
  const verb = action.slice(eventTypePrefix.length) as EventVerb;
  const dataParam = sent.param ?? "data";
  // Text (data_base64's bytes, text/plain data, a body with no content type) is read as JSON.
  let data: unknown = sent.value;
  if (sent.text !== undefined && sent.text !== "") {
    try {
      data = JSON.parse(sent.text);
    } catch {
      return refuse(
        `the event's ${dataParam} must be a JSON object, like {"model":"qwen"}, not text that is not JSON (${event.datacontenttype ?? "no datacontenttype"})`,
        "invalid_json",
        400,
        dataParam,
      );
    }
  }
  // A JSON string that holds a JSON object is data serialised twice, which is what an SDK sends when
  // handed data already JSON.stringify'd (the JavaScript SDK in structured mode): read as that object.
  const twice = typeof data === "string" ? jsonObjectIn(data) : undefined;
  if (twice !== undefined) data = twice;
  if (data !== undefined && data !== null && (typeof data !== "object" || Array.isArray(data)))
    return refuse(
      `the event's ${dataParam} must be a JSON object, like {"model":"qwen"}, not a JSON ${Array.isArray(data) ? "array" : typeof data}`,
      "invalid_event",
      400,
      dataParam,
    );
  const fields = (data ?? {}) as { model?: unknown; for?: unknown };
  // A number or an object there is a mistake about data.model, not an event that names no model.
  if (fields.model !== undefined && fields.model !== null && typeof fields.model !== "string")
    return refuse(
      `the event's data.model must be a string, a model's id or alias, not ${clip(JSON.stringify(fields.model))}`,
      "invalid_event",
      400,
      "data.model",
    );
  const model = event.subject || fields.model;
  if (typeof model !== "string" || model === "")
    // Named as the subject: where a model is looked for first.
    return refuse("the event names no model: set its subject or data.model", "missing_model", 400, "subject");
  const command: EventCommand = {
    verb,
    model,
    modelFrom: event.subject ? "subject" : "data.model",
    ...(event.subject && typeof fields.model === "string" && fields.model !== event.subject
      ? { dataModel: fields.model }
      : {}),
    key: eventKey(event.source, event.id),
    source: clip(event.source),
    eventId: clip(event.id),
    ...(typeof event.traceparent === "string" ? { traceparent: event.traceparent } : {}),
    ...(typeof event.tracestate === "string" ? { tracestate: event.tracestate } : {}),
  };
  if (fields.for !== undefined) {
    // Only a prewarm keeps a model awake for a while: acting on a wake, sleep or stop and dropping
    // the duration the sender asked for would lose it without a word.
    if (verb !== "prewarm")
      return refuse(
        `data.for applies only to a prewarm, not to a ${verb}: send the type ${eventTypePrefix}prewarm (or ${actionExtension}: prewarm) to keep the model awake for a while, or leave data.for out`,
        "unsupported_field",
        400,
        "data.for",
      );
    const ms = typeof fields.for === "string" ? parseDuration(fields.for) : undefined;
    if (ms === undefined || !Number.isFinite(ms))
      return refuse(
        typeof fields.for === "number"
          ? // A JSON number has no unit; one too large for a double (1e999) parses as Infinity.
            `data.for must be a duration string with its unit, like "10m" or "600s", not the number ${Number.isFinite(fields.for) ? fields.for : "(too large to read)"}`
          : `data.for must be a duration like "10m", not ${JSON.stringify(fields.for)}`,
        "invalid_duration",
        400,
        "data.for",
      );
    command.forMs = ms;
  }
  return { ok: true, command };
}

/** The JSON object a string holds, if it holds one. */
function jsonObjectIn(text: string): object | undefined {
  if (!text.trimStart().startsWith("{")) return undefined;
  try {
    const value: unknown = JSON.parse(text);
    return typeof value === "object" && value !== null && !Array.isArray(value) ? value : undefined;
  } catch {
    return undefined;
  }
}

/** A digest of an event's source and id: what tells a redelivery, in the same room however long they are. */
function eventKey(source: string, id: string): string {
  // node:crypto with the first event, not at start: an idle `snooze serve` needs none of it.
  const { createHash } = process.getBuiltinModule("node:crypto");
  return createHash("sha256").update(`${source}\u0000${id}`).digest("base64url");
}

/**
 * The source + id of events already taken, for a bounded time and number, so a redelivery
 * (a Broker retries when it did not see the answer) is not acted on twice.
 */
export class RecentEvents {
  private readonly seen = new Map<string, number>();
  /** Actions of events still under way (a sleep waits for its drain), by key. */
  private readonly underWay = new Map<string, Promise<void>>();
  private readonly windowMs: number;
  private readonly capacity: number;
  private readonly now: () => number;

  constructor(windowMs = 10 * 60_000, capacity = 10_000, now: () => number = Date.now) {
    this.windowMs = windowMs;
    this.capacity = capacity;
    this.now = now;
  }

  has(key: string): boolean {
    const at = this.seen.get(key);
    if (at === undefined) return false;
    if (this.now() - at <= this.windowMs) return true;
    this.seen.delete(key);
    return false;
  }

  /**
   * Runs the action of the event `key` once: a redelivery that comes while it is under way (a
   * Broker gave up waiting for the answer of a sleep that drains for minutes) waits for the same
   * outcome instead of acting again. Once it succeeds the event counts as taken; one that failed
   * may be tried again.
   */
  once(key: string, act: () => Promise<void>): Promise<void> {
    const running = this.underWay.get(key);
    if (running) return running;
    const action = act().then(() => this.add(key));
    this.underWay.set(key, action);
    const forget = () => this.underWay.delete(key);
    action.then(forget, forget);
    return action;
  }

  add(key: string): void {
    this.seen.delete(key);
    this.seen.set(key, this.now());
    // Oldest first: a Map keeps insertion order.
    for (const [oldest, at] of this.seen) {
      if (this.seen.size <= this.capacity && this.now() - at <= this.windowMs) break;
      this.seen.delete(oldest);
    }
  }
}

export interface EventEndpointDeps {
  admin: Pick<AdminActions, "wake" | "sleep" | "stop" | "prewarm">;
  /** The model id an id or alias names. */
  modelNamed(name: string): string | undefined;
  knownModels(): string[];
  recent: RecentEvents;
  log?: Logger;
  /**
   * What a body still arriving must bring in each window (the activator's `bodyTimeout`): a body
   * that stalls is a 408, not a connection held until Node's request timeout (5 minutes).
   */
  bodyPace?: () => MinimumPace;
  /**
   * When the delivery's sender holds a token of its own rather than the admin token
   * (event-senders.ts): who it is, asked before the body is read, and whether it may do what the
   * events ask, asked before any is taken (a redelivery too).
   */
  sender?: SenderCheck;
}

/** Answers with no body, as Knative Eventing expects of a subscriber that sends no reply event. */
function accepted(res: ServerResponse, status: number, outcome: string): void {
  res.writeHead(status, { "content-length": "0", "snooze-event": outcome });
  res.end();
}

/** Answers a refusal in the OpenAI shape, its field (if it names one) in `param`. */
function sendRefusal(res: ServerResponse, refusal: EventRefusal, headers?: Record<string, string>): void {
  sendError(
    res,
    refusal.status,
    openAIError(refusal.message, "invalid_request_error", refusal.code, refusal.param ?? null),
    headers,
  );
}

/** The bytes of a message's ce-* headers, names and values. */
function attributeHeaderBytes(req: IncomingMessage): number {
  let bytes = 0;
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2)
    if (raw[i]!.length > 3 && raw[i]!.slice(0, 3).toLowerCase() === "ce-")
      bytes += Buffer.byteLength(raw[i]!) + Buffer.byteLength(raw[i + 1]!);
  return bytes;
}

/**
 * A sender refused for its token: said in the log too, since a scheduled source (a PingSource)
 * reports its failed deliveries only in its own adapter's log, where whoever set up the schedule
 * rarely looks. A token that is no sender's at all (401) is anyone's noise: debug only.
 */
function refusedSender(deps: EventEndpointDeps, refusal: AdminRefusal): void {
  const fields = {
    status: refusal.status,
    code: refusal.body.error.code,
    reason: refusal.body.error.message,
  };
  if (refusal.status === 401) deps.log?.debug("event sender refused", fields);
  else deps.log?.warn("event sender refused", fields);
}

/**
 * `POST /snooze/v1/events`, a Knative Trigger's subscriber: 202 once a wake or prewarm is under
 * way, 200 once a sleep or stop is done, 200 for an event already taken (`snooze-event:
 * duplicate`), all with an empty body; 400 for a message that is not a valid Snooze event, 404 for
 * a model that does not exist, 413 past `maxEventSize`, each with an OpenAI-shaped reason.
 */
export async function handleIncomingEvents(
  req: IncomingMessage,
  res: ServerResponse,
  deps: EventEndpointDeps,
): Promise<void> {
  if (refuseEncodedBody(req, res, "event")) return;
  // A stranger learns nothing of the models (a 404 lists them) and has no body read.
  const unknown = await deps.sender?.authenticate();
  if (unknown) {
    req.resume();
    refusedSender(deps, unknown);
    sendError(res, unknown.status, unknown.body, unknown.headers);
    return;
  }
  let body: Buffer;
  // A binary-mode event's attributes are its ce-* headers: they count towards the limit too.
  const limit = maxEventSize - attributeHeaderBytes(req);
  try {
    // Refused before `100 Continue` when the headers already say no: the body is never sent.
    if (limit < 0 || Number(req.headers["content-length"]) > limit) throw new BodyTooLarge(limit);
    const unread = unreadFormat(req.headers);
    if (unread || !looksLikeCloudEvent(req.headers)) {
      sendRefusal(res, unread ?? notACloudEvent());
      return;
    }
    sendContinue(req, res);
    body = await readBody(req, limit, undefined, undefined, deps.bodyPace?.());
  } catch (error) {
    if (error instanceof BodyStalled) {
      sendError(res, 408, openAIError(error.advice, "invalid_request_error", "request_timeout"), {
        connection: "close",
      });
      return;
    }
    if (!(error instanceof BodyTooLarge)) throw error;
    sendError(
      res,
      413,
      openAIError(
        `the event is larger than the limit of ${maxEventSize} bytes (its body and ce-* headers together)`,
        "invalid_request_error",
        "event_too_large",
      ),
      { connection: "close" },
    );
    return;
  }
  const parsed = parseIncomingEvents(req.headers, body, req.rawHeaders);
  if (!parsed.ok) {
    sendRefusal(res, parsed);
    return;
  }
  const resolved: (EventCommand & { id: string })[] = [];
  for (const [index, command] of parsed.commands.entries()) {
    const which =
      parsed.mode === "batch" ? `event ${index + 1} of ${parsed.commands.length} in the batch: ` : "";
    const id = deps.modelNamed(command.model);
    if (!id) {
      sendError(
        res,
        404,
        openAIError(
          `${which}the event names the model \`${clip(command.model)}\`, which does not exist; known models: ${knownModels(deps.knownModels())}`,
          "invalid_request_error",
          "model_not_found",
          command.modelFrom,
        ),
      );
      return;
    }
    // A subject and a data.model naming two models: acting on one (a stop!) could be the wrong one.
    if (command.dataModel !== undefined && deps.modelNamed(command.dataModel) !== id) {
      sendRefusal(
        res,
        refuse(
          `${which}the event's subject names the model \`${clip(command.model)}\` and its data.model \`${clip(command.dataModel)}\`, not the same one: name the model once, in the subject or in data.model`,
          "invalid_event",
          400,
          "data.model",
        ),
      );
      return;
    }
    resolved.push({ ...command, id });
  }
  const forbidden = await deps.sender?.authorize(resolved.map(({ verb, id }) => ({ verb, model: id })));
  if (forbidden) {
    refusedSender(deps, forbidden);
    sendError(res, forbidden.status, forbidden.body, forbidden.headers);
    return;
  }
  // An event twice in one batch is a redelivery too: its copy is not acted on again.
  const inBatch = new Set<string>();
  const fresh = resolved.filter((command) => {
    if (deps.recent.has(command.key) || inBatch.has(command.key)) return false;
    inBatch.add(command.key);
    return true;
  });
  if (fresh.length === 0) {
    accepted(res, 200, "duplicate");
    return;
  }
  let waited = false;
  for (const command of fresh) {
    // What the event asked, and which event it was (a PingSource's, a cron job's): the tier lines
    // that follow name no cause, and an activation continues the event's own trace, not the
    // delivery's, whose ids this line carries; its `traceparent` joins the two (found by an outside
    // tester: an event's wake showed in the log as a start out of nowhere).
    deps.log?.info("asked by an event", {
      model: command.id,
      action: command.verb,
      source: command.source,
      id: command.eventId,
      ...(command.traceparent ? { traceparent: command.traceparent } : {}),
    });
    if (command.verb === "wake" || command.verb === "prewarm") {
      deps.recent.add(command.key);
      // A wake may take minutes: it goes on after the answer (watch the tier). A prewarm, where the
      // control plane offers it, wakes at prewarm priority (in a slot it never evicts a busy resident
      // and yields to any request) and keeps the model awake for its `for` within the prewarmBudget;
      // without a `for` it keeps it no longer than its ladder would. It was a wake then, which waits
      // in a slot as a held request does and drains a busy resident (found by an outside tester).
      const prewarm = command.verb === "prewarm" ? deps.admin.prewarm : undefined;
      // The activation continues the trace of what made the event (its traceparent extension),
      // else the delivery's (the HTTP traceparent, which this request's server span continues).
      const caller = remoteContextOf(command.traceparent, command.tracestate) ?? context.active();
      void (
        prewarm
          ? prewarm(command.id, command.forMs ?? 0, { caller })
          : deps.admin.wake(command.id, { caller })
      ).catch((error: unknown) =>
        deps.log?.warn("wake asked by an event failed", { model: command.id, error }),
      );
      if (command.verb === "prewarm" && !prewarm)
        deps.log?.info("prewarm: woken; staying awake follows the model's sleepAfter", {
          model: command.id,
          ...(command.forMs !== undefined ? { for: formatDuration(command.forMs) } : {}),
        });
    } else {
      waited = true;
      const { verb, id } = command;
      try {
        await deps.recent.once(command.key, () => deps.admin[verb](id));
      } catch (error) {
        // Requests held since kept the model awake (the sender may retry), or the action failed.
        const unfinished = error instanceof AdminActionUnfinished;
        sendError(
          res,
          unfinished ? 504 : 500,
          openAIError(
            unfinished || error instanceof SleepStoppedInstead
              ? (error as Error).message
              : `${command.verb} of \`${command.id}\` failed: ${(error as Error).message}`,
            "server_error",
            unfinished ? "action_unfinished" : "action_failed",
          ),
        );
        return;
      }
    }
  }
  accepted(res, waited ? 200 : 202, fresh.length < resolved.length ? "accepted; some duplicate" : "accepted");
}
