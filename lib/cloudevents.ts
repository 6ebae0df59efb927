import type { IncomingHttpHeaders } from "node:http";
import type { CloudEvent, Message } from "cloudevents";
import { ownAttributes, processCeOverrides } from "./ce-overrides.ts";
import { encodeAttributeHeaders } from "./cloudevents-header.ts";
import { cloudEvents } from "./cloudevents-sdk.ts";
import type { Logger } from "./log.ts";
import { Counter, type Registry } from "./prometheus.ts";
import { QueueOverflow } from "./queue-overflow.ts";
import { redactUrl } from "./redact-url.ts";
import { type Agent, undici } from "./undici.ts";
import { urlCredentials } from "./url-credentials.ts";

/** How an event goes over HTTP: `ce-*` headers and the data as the body, or one JSON document. */
export type EventMode = "binary" | "structured";
export const eventModes: readonly EventMode[] = ["binary", "structured"];

export interface CloudEventSinkOptions {
  /** The sink: a Knative Broker, a channel, or any HTTP endpoint. */
  url: string;
  /** The `source` attribute of every event. */
  source: string;
  log: Logger;
  registry: Registry;
  /** Binary content mode unless asked otherwise (what Knative's own sources send). */
  mode?: EventMode;
  /** One delivery attempt may take this long (connect, headers and body). */
  timeoutMs?: number;
  /** Retries after the first attempt, on a transport error or a retryable status. */
  retries?: number;
  /** The first retry waits this long; each further one twice as long (Knative's `exponential`). */
  backoffMs?: number;
  /** A `Retry-After` longer than this is not honoured in full. */
  maxRetryAfterMs?: number;
  /** Events queued, waiting for a retry or in flight: past this, new ones are dropped and counted. */
  maxQueued?: number;
  /** Deliveries in flight at once. */
  concurrency?: number;
  /** Extension attributes set on every event (Knative SinkBinding's `K_CE_OVERRIDES`). */
  extensions?: Record<string, string>;
  /** Numbers the events (the `sequence` attribute); default: a sequence of this sink's own. */
  sequence?: EventSequence;
}

/**
 * The `sequence` extension's values of one source: `<epoch ms>-<count>`, both zero-padded, so they
 * sort in the order the events were made when compared as strings, across restarts too (a later
 * process has a later epoch). Every event made takes the next count, delivered or not.
 */
export class EventSequence {
  private readonly epoch: string;
  private count = 0;

  constructor(epochMs = Date.now()) {
    this.epoch = String(Math.floor(epochMs)).padStart(13, "0");
  }

  next(): string {
    return `${this.epoch}-${String(++this.count).padStart(10, "0")}`;
  }
}

const processSequences = new Map<string, EventSequence>();

/**
 * The sequence of `source` in this process: it starts at the process's start, and every sink of the
 * source continues it (a reload that names another sink or mode builds a new one).
 */
export function processEventSequence(source: string): EventSequence {
  let sequence = processSequences.get(source);
  if (!sequence) {
    sequence = new EventSequence(performance.timeOrigin);
    processSequences.set(source, sequence);
  }
  return sequence;
}

/** What an event may carry besides its type, subject and data. */
export interface EventExtras {
  /** The distributed-tracing extension: the W3C traceparent of the activation the event is about. */
  traceparent?: string;
  /** Its W3C tracestate, carried with it when non-empty (the same extension). */
  tracestate?: string;
}

/** Where Snooze's CloudEvents go: `emit` never blocks and never throws. */
export interface EventSink {
  emit(type: string, subject: string, data: Record<string, unknown>, extras?: EventExtras): void;
  /** Waits (bounded) until queued deliveries are done; at shutdown. */
  drain?(timeoutMs: number): Promise<void>;
  /**
   * Stops. Events still queued, waiting for a retry or in flight are lost: one warning says how
   * many, of which types, and `why` (the caller knows: a shutdown, a new sink).
   */
  close?(why?: string): Promise<void>;
}

interface Delivery {
  type: string;
  subject: string;
  message: Message;
  attempt: number;
}

/**
 * Statuses Knative Eventing's delivery retries (besides transport errors and timeouts): every 5xx,
 * 404 (a Broker or subscriber not there yet), 408, 409 and 429. Anything else is final.
 */
export function isRetryableStatus(status: number): boolean {
  return status >= 500 || status === 404 || status === 408 || status === 409 || status === 429;
}

/**
 * Sends CloudEvents, built and validated by the `cloudevents` SDK, to a sink, without ever
 * slowing the caller: `emit` only queues. Deliveries run on Snooze's own undici agent with a
 * timeout per attempt (the SDK's own transport has none, and resolves on any status); a
 * transport error, a timeout or a retryable status is retried with exponential back-off, as
 * Knative's delivery does. The queue is bounded: an event that does not fit is dropped and
 * counted in `snooze_cloudevents_total{outcome="dropped"}`, since an event stream must not hold
 * up a wake.
 */
export class CloudEventSink implements EventSink {
  readonly url: string;
  readonly mode: EventMode;
  private readonly source: string;
  private readonly log: Logger;
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly backoffMs: number;
  private readonly maxRetryAfterMs: number;
  private readonly maxQueued: number;
  private readonly concurrency: number;
  private readonly extensions: Record<string, string>;
  private readonly outcomes: Counter;
  private readonly retried: Counter;
  private readonly agent: Agent;
  private readonly ready: Delivery[] = [];
  /** Deliveries waiting for their retry, by the timer that brings them back. */
  private readonly waiting = new Map<NodeJS.Timeout, Delivery>();
  /** Deliveries in flight, until their attempt has ended. */
  private readonly sending = new Set<Promise<void>>();
  /** Deliveries whose attempt the close cut off. */
  private readonly cutOff: Delivery[] = [];
  private readonly idle = new Set<() => void>();
  private active = 0;
  private closed = false;
  private readonly sequence: EventSequence;
  private readonly overflow = new QueueOverflow();

  constructor(options: CloudEventSinkOptions) {
    this.url = options.url;
    this.source = options.source;
    this.log = options.log.child({ sink: redactUrl(options.url) });
    this.mode = options.mode ?? "binary";
    this.timeoutMs = options.timeoutMs ?? 5_000;
    this.retries = options.retries ?? 4;
    this.backoffMs = options.backoffMs ?? 200;
    this.maxRetryAfterMs = options.maxRetryAfterMs ?? 30_000;
    this.maxQueued = options.maxQueued ?? 100;
    this.concurrency = options.concurrency ?? 4;
    // Snooze's own attributes are never replaced, whatever the extensions say.
    this.extensions = Object.fromEntries(
      Object.entries(options.extensions ?? {}).filter(([name]) => !ownAttributes.has(name)),
    );
    this.sequence = options.sequence ?? new EventSequence();
    this.outcomes = counter(options.registry, {
      name: "snooze_cloudevents_total",
      help: "CloudEvents for the sink, by type and outcome: delivered, failed (refused, or retries spent), dropped (queue full, or still queued or in flight when the sink closed), invalid (not built).",
      labelNames: ["type", "outcome"],
    });
    this.retried = counter(options.registry, {
      name: "snooze_cloudevents_retries_total",
      help: "Delivery attempts of CloudEvents that were retried, by type.",
      labelNames: ["type"],
    });
    this.agent = new (undici().Agent)({
      connect: { timeout: this.timeoutMs },
      headersTimeout: this.timeoutMs,
      bodyTimeout: this.timeoutMs,
      keepAliveTimeout: 4_000,
    });
  }

  /** Events queued, waiting for a retry, or in flight. */
  get pending(): number {
    return this.ready.length + this.waiting.size + this.active;
  }

  emit(type: string, subject: string, data: Record<string, unknown>, extras: EventExtras = {}): void {
    // Every event gets the next one, dropped or not: a consumer sees a gap where one was lost, and
    // can put back in order those that retries or parallel deliveries brought out of it.
    const sequence = this.sequence.next();
    if (this.closed || this.pending >= this.maxQueued) {
      this.outcomes.inc({ type, outcome: "dropped" });
      this.log.debug("CloudEvent dropped: the queue is full", { type, subject });
      // Said once as the queue fills, and counted once it has room (sayOverflow): a line per event
      // would flood the log just when the sink is down.
      if (!this.closed && this.overflow.drop(type))
        this.log.warn("CloudEvents are dropped: the sink's queue is full", {
          maxQueued: this.maxQueued,
          reason: "the sink takes them slower than they come (it is down, slow, or refusing them)",
        });
      return;
    }
    this.sayOverflow();
    const { CloudEvent, HTTP } = cloudEvents();
    let event: CloudEvent<Record<string, unknown>>;
    try {
      event = new CloudEvent({
        ...this.extensions,
        ...(extras.traceparent
          ? {
              traceparent: extras.traceparent,
              ...(extras.tracestate ? { tracestate: extras.tracestate } : {}),
            }
          : {}),
        sequence,
        specversion: "1.0",
        source: this.source,
        type,
        subject,
        datacontenttype: "application/json",
        data,
      });
    } catch (error) {
      this.outcomes.inc({ type, outcome: "invalid" });
      this.log.warn("CloudEvent not built", { type, subject, error });
      return;
    }
    const built = this.mode === "structured" ? HTTP.structured(event) : HTTP.binary(event);
    // The SDK writes attribute values into ce-* headers as they are; the binding percent-encodes them.
    const message = { ...built, headers: encodeAttributeHeaders(built.headers as Record<string, string>) };
    this.ready.push({ type, subject, message, attempt: 0 });
    this.pump();
  }

  /** Resolves once nothing is queued, waiting or in flight, or after `timeoutMs`. */
  async drain(timeoutMs = 5_000): Promise<void> {
    if (this.pending === 0) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        clearTimeout(timer);
        this.idle.delete(done);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      timer.unref();
      this.idle.add(done);
    });
  }

  /**
   * Stops: deliveries in flight are cut off, events queued or waiting for a retry are dropped, all
   * counted as dropped. One warning says how many were lost, of which types, and why (`why`), in
   * place of a line per event with the HTTP client's own words for the cut.
   */
  async close(why = "the sink was closed before it took them"): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.sayOverflow();
    const waiting = [...this.waiting.values()];
    for (const timer of this.waiting.keys()) clearTimeout(timer);
    this.waiting.clear();
    const queued = this.ready.splice(0);
    const inFlight = [...this.sending];
    await this.agent.destroy().catch(() => {});
    // An attempt answered before the cut counts as it ended; the others land in `cutOff`.
    await Promise.allSettled(inFlight);
    const cut = this.cutOff.splice(0);
    const lost = [...cut, ...waiting, ...queued];
    if (lost.length === 0) return;
    const types: Record<string, number> = {};
    for (const delivery of lost) {
      this.outcomes.inc({ type: delivery.type, outcome: "dropped" });
      types[delivery.type] = (types[delivery.type] ?? 0) + 1;
    }
    this.log.warn(
      `${lost.length} CloudEvent${lost.length === 1 ? " was" : "s were"} not delivered and ${lost.length === 1 ? "is" : "are"} lost`,
      {
        reason: why,
        types,
        inFlight: cut.length,
        waitingForRetry: waiting.length,
        queued: queued.length,
      },
    );
  }

  /** The count of a run of drops by a full queue, once it ends. */
  private sayOverflow(): void {
    const run = this.overflow.end();
    if (run)
      this.log.warn(
        `${run.count} CloudEvent${run.count === 1 ? " was" : "s were"} dropped while the sink's queue was full`,
        { types: run.types },
      );
  }

  private pump(): void {
    while (!this.closed && this.active < this.concurrency && this.ready.length > 0) {
      const delivery = this.ready.shift()!;
      this.active++;
      const sent: Promise<void> = this.send(delivery).finally(() => {
        this.sending.delete(sent);
        this.active--;
        this.pump();
        if (this.pending === 0) for (const done of [...this.idle]) done();
      });
      this.sending.add(sent);
    }
  }

  private async send(delivery: Delivery): Promise<void> {
    const { type, subject, message } = delivery;
    let reason: string;
    let retryAfterMs: number | undefined;
    try {
      const response = await this.post(message);
      const status = response.status;
      if (status >= 200 && status < 300) {
        this.outcomes.inc({ type, outcome: "delivered" });
        return;
      }
      reason = `the sink answered ${status}${redirectNote(status, response.location, response.hops)}`;
      if (!isRetryableStatus(status)) {
        this.gaveUp(delivery, reason);
        return;
      }
      retryAfterMs = retryAfter(response.headers["retry-after"]);
    } catch (error) {
      // Cut off by the close: its one warning tells of it, not the HTTP client's words.
      if (this.closed) {
        this.cutOff.push(delivery);
        return;
      }
      reason = (error as Error).name === "TimeoutError" ? "the sink did not answer in time" : String(error);
    }
    // A retry that would come after the close: lost with the others the close tells of.
    if (this.closed) {
      this.cutOff.push(delivery);
      return;
    }
    if (delivery.attempt >= this.retries) {
      this.gaveUp(delivery, reason);
      return;
    }
    const backoff = this.backoffMs * 2 ** delivery.attempt;
    const wait = Math.max(backoff, Math.min(retryAfterMs ?? 0, this.maxRetryAfterMs));
    delivery.attempt++;
    this.retried.inc({ type });
    this.log.debug("CloudEvent delivery failed; retrying", { type, subject, reason, inMs: wait });
    const timer = setTimeout(() => {
      this.waiting.delete(timer);
      this.ready.push(delivery);
      this.pump();
    }, wait);
    timer.unref();
    this.waiting.set(timer, delivery);
  }

  /**
   * One attempt: the message POSTed to the sink, and on to where a 307 or 308 points, as Go's HTTP
   * client (Knative's delivery) follows them, at most `maxRedirects` times, all within the
   * attempt's timeout. The URL's credentials go to its own origin only. Any other status is the
   * answer: a 301, 302 or 303 would turn the POST into a GET without the event.
   */
  private async post(
    message: Message,
  ): Promise<{ status: number; headers: IncomingHttpHeaders; location?: string; hops: number }> {
    const signal = AbortSignal.timeout(this.timeoutMs);
    const first = new URL(this.url);
    const auth = basicAuth(first);
    let url = first;
    for (let hops = 0; ; hops++) {
      const response = await this.agent.request({
        origin: url.origin,
        path: `${url.pathname}${url.search}`,
        method: "POST",
        headers: {
          ...(message.headers as Record<string, string>),
          ...(url.origin === first.origin ? auth : {}),
        },
        body: message.body as string | undefined,
        signal,
      });
      await response.body.dump().catch(() => {});
      const status = response.statusCode;
      const header = response.headers.location;
      const location = typeof header === "string" ? header : undefined;
      const next = location === undefined ? undefined : URL.parse(location, url.href);
      if (
        (status !== 307 && status !== 308) ||
        hops === maxRedirects ||
        !next ||
        (next.protocol !== "http:" && next.protocol !== "https:")
      )
        return { status, headers: response.headers, location: next?.href ?? location, hops };
      url = next;
    }
  }

  private gaveUp(delivery: Delivery, reason: string): void {
    this.outcomes.inc({ type: delivery.type, outcome: "failed" });
    this.log.warn("CloudEvent not delivered", {
      type: delivery.type,
      subject: delivery.subject,
      attempts: delivery.attempt + 1,
      reason,
    });
  }
}

/** Redirects one delivery attempt follows (Go's HTTP client stops after 10). */
const maxRedirects = 10;

/** What a redirect the delivery did not follow (or followed too often) is, for the log. */
function redirectNote(status: number, location: string | undefined, hops: number): string {
  if (status < 300 || status > 399 || location === undefined) return "";
  if (status === 307 || status === 308)
    return hops === maxRedirects
      ? ` after ${hops} redirects (to ${redactUrl(location)})`
      : ` redirecting to ${redactUrl(location)}, which is no http or https URL`;
  return `, a redirect to ${redactUrl(location)} that would drop the event (only a 307 or 308 keeps a POST's body): set the sink to where it points`;
}

function counter(
  registry: Registry,
  configuration: { name: string; help: string; labelNames: string[] },
): Counter {
  // Two sinks of one process (tests) share the registry's counter.
  const existing = registry.getSingleMetric(configuration.name);
  return (existing as Counter | undefined) ?? new Counter({ ...configuration, registers: [registry] });
}

function retryAfter(value: string | string[] | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (!text) return undefined;
  const seconds = Number(text);
  if (Number.isFinite(seconds)) return Math.max(0, seconds * 1000);
  const at = Date.parse(text);
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now());
}

/**
 * The `source` attribute of this process's events, a URI reference: `/` and each segment
 * percent-encoded. A name is written as it was given (`--identity`, the host name), and one with
 * a space in it made a source the SDK refused, so every event was counted invalid and none sent.
 */
export function eventSourceOf(...segments: string[]): string {
  return `/${segments.map(encodeURIComponent).join("/")}`;
}

/**
 * Why `url` cannot be a sink (it is no http or https URL, or its user name or password does not
 * decode), in words, or undefined when it can.
 */
export function sinkUrlProblem(url: string): string | undefined {
  const example = "write it like http://broker.example/";
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return `it is not a URL: ${example}`;
  }
  // `localhost:9000` parses, with `localhost:` as its scheme.
  if (parsed.protocol !== "http:" && parsed.protocol !== "https:")
    return `it does not start with http:// or https://: ${example}`;
  // Found by an outside tester: a password `p%ss` was taken, and every event then failed its five
  // attempts with "URIError: URI malformed", the sink never asked.
  const credentials = urlCredentials(parsed);
  return "problem" in credentials ? credentials.problem : undefined;
}

/**
 * The sink for outgoing events: the one configured (`eventSink`, `--event-sink`), else Knative
 * SinkBinding's `K_SINK`; none when neither is set, or when the one set is no http(s) URL (said once).
 */
export function createEventSink(options: {
  configured?: string;
  mode?: EventMode;
  source: string;
  log: Logger;
  registry: Registry;
}): CloudEventSink | undefined {
  const url = options.configured || process.env.K_SINK;
  if (!url) return undefined;
  // eventSink and --event-sink are checked where they are read; K_SINK is not, and a value that is
  // no http(s) URL (`localhost:9000`) failed every delivery, each retried four times and warned of.
  const problem = sinkUrlProblem(url);
  if (problem) {
    options.log.warn(
      `${options.configured ? "the event sink" : "K_SINK"} is not used: no CloudEvents are sent`,
      {
        sink: redactUrl(url),
        reason: problem,
      },
    );
    return undefined;
  }
  return new CloudEventSink({
    url,
    source: options.source,
    mode: options.mode,
    log: options.log,
    registry: options.registry,
    extensions: processCeOverrides(options.log),
    // A reload's new sink continues the count of the one before.
    sequence: processEventSequence(options.source),
  });
}

/**
 * A URL's user and password as HTTP Basic authentication (RFC 7617), as a browser or the
 * OpenTelemetry exporter sends them: the origin Snooze dials does not carry them (found by an
 * outside tester: a sink reached as `https://user:key@host/` got no credentials at all).
 */
function basicAuth(url: URL): { authorization?: string } {
  if (!url.username && !url.password) return {};
  // The sink's URL was checked (sinkUrlProblem): its credentials decode.
  const credentials = urlCredentials(url);
  if ("problem" in credentials) return {};
  const user = `${credentials.user}:${credentials.password}`;
  return { authorization: `Basic ${Buffer.from(user).toString("base64")}` };
}
