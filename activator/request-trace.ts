import type { IncomingMessage, OutgoingHttpHeaders } from "node:http";
import {
  type Attributes,
  type Context,
  context,
  isSpanContextValid,
  propagation,
  type Span,
  SpanKind,
  SpanStatusCode,
  trace,
} from "@opentelemetry/api";
import { eventsEnd } from "../lib/http/sse.ts";
import { parseJson } from "../lib/json-object.ts";
import { tracer, tracingRegistered } from "../lib/tracing.ts";
import { spanMethod } from "./known-method.ts";

/**
 * The GenAI operation an inference route performs (`gen_ai.operation.name`): OpenAI's, and
 * Anthropic's Messages API, which vLLM serves for Claude's clients, a chat as the conventions name
 * it (found by an outside tester: its spans were `POST /v1/messages`, with no operation).
 */
const operations: Record<string, string> = {
  "/v1/chat/completions": "chat",
  "/v1/completions": "text_completion",
  "/v1/embeddings": "embeddings",
  "/v1/responses": "chat",
  "/v1/messages": "chat",
};

export function genAiOperation(route: string | undefined): string | undefined {
  return route ? operations[route] : undefined;
}

/** `server.address` and `server.port` of the Host header a client used. */
function hostAttributes(host: string | undefined): Attributes {
  if (!host) return {};
  try {
    const url = new URL(`http://${host}`);
    return {
      "server.address": url.hostname.replace(/^\[(.*)\]$/, "$1"),
      ...(url.port ? { "server.port": Number(url.port) } : {}),
    };
  } catch {
    return {};
  }
}

/**
 * The SERVER span of one OpenAI request, continuing the caller's trace: W3C trace context
 * (`traceparent`, `tracestate`, and whatever the configured propagator reads) is extracted from the
 * request headers. Named `{method} {http.route}` as OpenTelemetry's HTTP conventions say; `route`
 * is the normalised route, never the client's text.
 */
export function startServerSpan(
  req: IncomingMessage,
  route: string | undefined,
  urlPath: string,
): { span: Span; ctx: Context } {
  const parent = propagation.extract(context.active(), req.headers);
  const method = spanMethod(req.method ?? "GET");
  const operation = genAiOperation(route);
  const span = tracer.startSpan(
    `${method.name} ${route ?? "/v1/*"}`,
    {
      kind: SpanKind.SERVER,
      // Given at the start, where a sampler sees them; with no SDK a no-op span would drop them.
      attributes: tracingRegistered()
        ? {
            ...method.attributes,
            "url.path": urlPath,
            "url.scheme": "http",
            ...(route ? { "http.route": route } : {}),
            ...hostAttributes(req.headers.host),
            ...(req.httpVersion ? { "network.protocol.version": req.httpVersion } : {}),
            ...(req.headers["user-agent"]
              ? { "user_agent.original": String(req.headers["user-agent"]) }
              : {}),
            ...(operation ? { "gen_ai.operation.name": operation } : {}),
          }
        : undefined,
    },
    parent,
  );
  // Without an SDK the span is a no-op with no trace to carry: a context holding it would only cost
  // memory for every request (a held one keeps it while held). A sampled-out span still carries
  // the caller's trace, so one with a valid span context always goes into the context.
  const carried = span.isRecording() || isSpanContextValid(span.spanContext());
  return { span, ctx: carried ? trace.setSpan(parent, span) : parent };
}

/** What a request's answer said about token usage (OpenAI's `usage` object). */
export interface Usage {
  inputTokens?: number;
  outputTokens?: number;
  responseModel?: string;
}

/** How much of an answer's end a tap keeps: a usage chunk is small, and comes last. */
const tailBytes = 16 * 1024;
/** A JSON answer up to this size is read whole for its usage; a larger one only by its tail. */
const wholeBodyBytes = 1024 * 1024;

/**
 * Watches an answer go by without holding it up or copying it: it keeps references to the chunks
 * of a JSON answer up to 1 MiB (to parse `usage` once it has ended), and of an SSE stream only the
 * last 16 KiB (where the final usage chunk of `stream_options.include_usage` is), or as much more
 * (up to 1 MiB) as its last two events take.
 */
export class UsageTap {
  private chunks: Buffer[] = [];
  /** SSE: where the last two events ending in each chunk end (`eventEnds`). */
  private ends: [number, number][] = [];
  private size = 0;
  private kind: "json" | "sse" | "other" = "other";

  /** The answer's headers arrived. */
  response(contentType: string): void {
    this.kind = contentType.includes("text/event-stream")
      ? "sse"
      : contentType.includes("json")
        ? "json"
        : "other";
  }

  chunk(chunk: Buffer): void {
    if (this.kind === "other") return;
    this.chunks.push(chunk);
    this.size += chunk.length;
    if (this.kind === "json") {
      if (this.size > wholeBodyBytes) {
        this.kind = "other";
        this.chunks = [];
        this.size = 0;
      }
      return;
    }
    this.ends.push(eventEnds(chunk));
    while (
      this.chunks.length > 1 &&
      this.size - this.chunks[0]!.length >= tailBytes &&
      (this.size > wholeBodyBytes || this.lastTwoAfterFirst())
    ) {
      this.size -= this.chunks.shift()!.length;
      this.ends.shift();
    }
  }

  /**
   * Whether the last two events (the last whole or not yet; usage is in the last or, before
   * `[DONE]`, the one before) begin after the first chunk kept, which may then go: a Responses API
   * stream's `response.completed` repeats the whole answer, instructions and tools, tens of KiB read
   * in pieces, and with its start gone its usage was lost. Up to 1 MiB is kept for them.
   */
  private lastTwoAfterFirst(): boolean {
    const last = this.chunks.length - 1;
    let starts = 0;
    for (let i = last; i >= 1 && starts < 2; i--) {
      const [end, before] = this.ends[i]!;
      // An event begins after each end that bytes follow: the chunk's own, or the next chunk's.
      if (end > 0 && (end < this.chunks[i]!.length || i < last)) starts++;
      if (before > 0) starts++;
    }
    return starts >= 2;
  }

  /** The usage the answer reported, if it did. */
  usage(): Usage | undefined {
    if (this.kind === "other" || this.size === 0) return undefined;
    const text = Buffer.concat(this.chunks, this.size).toString("utf8");
    if (this.kind === "json") return usageOf(parseJson(text));
    // The last `data:` event that carries a usage object.
    const events = text.split(/\r?\n/).filter((line) => line.startsWith("data:"));
    for (let i = events.length - 1; i >= 0; i--) {
      const payload = events[i]!.slice(5).trim();
      if (!payload.includes('"usage"')) continue;
      const found = usageOf(parseJson(payload));
      if (found) return found;
    }
    return undefined;
  }
}

/** Where the last event ending in `chunk` ends and where the one before it ends (0: none). */
function eventEnds(chunk: Buffer): [number, number] {
  const end = eventsEnd(chunk);
  // Without the last byte of its blank line, the last event's end is no end.
  return end === 0 ? [0, 0] : [end, eventsEnd(chunk.subarray(0, end - 1))];
}

function usageOf(body: unknown): Usage | undefined {
  type Reported = { usage?: Record<string, unknown> | null; model?: unknown; response?: unknown };
  const top = (body ?? {}) as Reported;
  // A streamed Responses API answer tells it in its last event (`response.completed`), inside the
  // response object it carries; chat and completions chunks, and a JSON answer, at the top.
  const nested = top.response;
  const { usage, model } = !top.usage && nested && typeof nested === "object" ? (nested as Reported) : top;
  if (!usage || typeof usage !== "object") return undefined;
  const number = (v: unknown) => (typeof v === "number" && Number.isFinite(v) ? v : undefined);
  const inputTokens = number(usage.prompt_tokens) ?? number(usage.input_tokens);
  const outputTokens = number(usage.completion_tokens) ?? number(usage.output_tokens);
  if (inputTokens === undefined && outputTokens === undefined) return undefined;
  return { inputTokens, outputTokens, ...(typeof model === "string" ? { responseModel: model } : {}) };
}

/** The usage attributes of OpenTelemetry's GenAI conventions. */
export function usageAttributes(usage: Usage | undefined): Attributes {
  if (!usage) return {};
  return {
    ...(usage.inputTokens !== undefined ? { "gen_ai.usage.input_tokens": usage.inputTokens } : {}),
    ...(usage.outputTokens !== undefined ? { "gen_ai.usage.output_tokens": usage.outputTokens } : {}),
    ...(usage.responseModel ? { "gen_ai.response.model": usage.responseModel } : {}),
  };
}

/** How one forward to an engine ended, as the CLIENT span records it. */
export type EngineCallOutcome =
  | { kind: "answered"; status: number }
  | { kind: "unanswered"; error: Error; reason?: string }
  | { kind: "failed"; status: number; reason: string; error: Error }
  | { kind: "aborted" };

/**
 * B3's headers in both encodings: OpenTelemetry's B3 propagator reads a caller's single `b3` or its
 * `x-b3-*` headers, whichever it was configured to write (`b3` or `b3multi`).
 */
const b3Headers = ["b3", "x-b3-traceid", "x-b3-spanid", "x-b3-sampled", "x-b3-flags", "x-b3-parentspanid"];

/**
 * The caller's headers the engine is sent Snooze's context in place of: the propagator's fields,
 * and with B3 the other encoding too. Found by an outside tester: with `b3multi`, a caller's single
 * `b3` went on beside Snooze's `x-b3-*`, and B3 readers prefer the single header, so the engine's
 * spans hung under the caller's span, past Snooze's call (with `b3`, a caller's `x-b3-*` likewise).
 */
function replacedFields(fields: string[]): string[] {
  return fields.some((field) => b3Headers.includes(field)) ? [...new Set([...fields, ...b3Headers])] : fields;
}

/**
 * The CLIENT span of one call to an engine, a child of the request's span: its context is what
 * the engine receives (`headers`), so the engine's own spans join the caller's trace. Named
 * `{gen_ai.operation.name} {gen_ai.request.model}` as the GenAI conventions say, with the HTTP
 * client attributes too.
 */
export class EngineCall {
  readonly span: Span;
  readonly headers: OutgoingHttpHeaders = {};
  /** A span that records wants the answer's usage; a no-op one need not watch the answer go by. */
  readonly recording: boolean;
  private readonly tap: UsageTap | undefined;
  private ended = false;

  constructor(options: EngineCallOptions) {
    const operation = genAiOperation(options.route);
    this.span = tracer.startSpan(
      operation ? `${operation} ${options.model}` : `${spanMethod(options.method).name} ${options.route}`,
      {
        kind: SpanKind.CLIENT,
        attributes: tracingRegistered() ? clientAttributes(options, operation) : undefined,
      },
    );
    this.recording = this.span.isRecording();
    this.tap = this.recording ? new UsageTap() : undefined;
    // A span with no trace (no SDK, no caller's trace) adds nothing to carry: no new context for it.
    const active = context.active();
    const carried = isSpanContextValid(this.span.spanContext()) ? trace.setSpan(active, this.span) : active;
    propagation.inject(carried, this.headers);
    // The propagator's fields (traceparent, tracestate, baggage by default) are Snooze's to send: a
    // field it leaves out (or empty) is not the client's either, which `forward` would pass on.
    // Found by an outside tester: a traceparent Snooze could not continue began a new trace, and the
    // caller's tracestate went to the engine beside it, the vendors' entries of another trace
    // (W3C Trace Context: a vendor that restarts the trace deletes tracestate). Without an SDK the
    // propagator has no fields, and the client's headers go on untouched.
    for (const field of replacedFields(propagation.fields()))
      if (!this.headers[field]) this.headers[field] = undefined;
  }

  /** The answer's headers arrived (the forward's tap). */
  response(status: number, contentType: string): void {
    this.span.setAttribute("http.response.status_code", status);
    this.tap?.response(contentType);
  }

  /** A chunk of the answer went by (the forward's tap). */
  chunk(chunk: Buffer): void {
    this.tap?.chunk(chunk);
  }

  /** The call is over; returns the usage the answer reported, for the request's span too. */
  end(outcome: EngineCallOutcome | undefined, error?: Error): Usage | undefined {
    if (this.ended) return undefined;
    this.ended = true;
    const usage = this.tap?.usage();
    if (usage) this.span.setAttributes(usageAttributes(usage));
    if (outcome?.kind === "answered" || outcome?.kind === "failed")
      this.span.setAttribute("http.response.status_code", outcome.status);
    // An engine's error answer is the call's error, a 4xx too: OpenTelemetry's HTTP conventions
    // leave a 4xx unset on a SERVER span (the client's mistake) but not on a CLIENT span, and name
    // the error by its status code. Found by an outside tester: an engine's 400 showed as a call
    // that went well, and its 500 had an error status but no error.type.
    if (outcome?.kind === "answered" && outcome.status >= 400) {
      this.span.setAttribute("error.type", String(outcome.status));
      this.span.setStatus({ code: SpanStatusCode.ERROR });
    }
    if (outcome?.kind === "unanswered" || outcome?.kind === "failed" || error) {
      const cause = error ?? (outcome as { error: Error }).error;
      this.span.recordException(cause);
      this.span.setAttribute(
        "error.type",
        (outcome && "reason" in outcome ? outcome.reason : undefined) ?? cause.name,
      );
      this.span.setStatus({ code: SpanStatusCode.ERROR, message: cause.message });
    }
    if (outcome?.kind === "aborted") this.span.setAttribute("snooze.client_aborted", true);
    this.span.end();
    return usage;
  }
}

/** What an engine call's span says of it. */
export interface EngineCallOptions {
  /** The model the engine was sent (the body's `model`): `gen_ai.request.model` and the span's name. */
  model: string;
  /** Snooze's id of the model (on Knative, the revision's): `snooze.model`. */
  snoozeModel?: string;
  /** The Knative revision (`namespace/name`) the request was routed to: `snooze.revision`. */
  revision?: string;
  /**
   * The route, as a template (`/v1/responses/{response_id}`): the span's name when it is no GenAI
   * operation, never the client's text (found by an outside tester: a stored response's retrieve
   * was named by its id and query, one span name per response).
   */
  route: string;
  /** The path and query sent (a stored response's id in it): `url.full`. */
  path: string;
  method: string;
  address: string;
  replica: string;
}

/**
 * `gen_ai.provider.name`, which the GenAI conventions require. Snooze's engines are vLLM: none of
 * the convention's well-known values (`openai` is OpenAI's own service, with `openai.*`
 * attributes) is theirs, and the convention then allows a custom value.
 */
export const genAiProvider = "vllm";

function clientAttributes(options: EngineCallOptions, operation: string | undefined): Attributes {
  const [host, port] = splitAddress(options.address);
  return {
    ...spanMethod(options.method).attributes,
    "url.full": `http://${options.address}${options.path}`,
    "server.address": host,
    ...(port ? { "server.port": port } : {}),
    ...(operation ? { "gen_ai.operation.name": operation } : {}),
    "gen_ai.provider.name": genAiProvider,
    "gen_ai.request.model": options.model,
    ...(options.snoozeModel ? { "snooze.model": options.snoozeModel } : {}),
    ...(options.revision ? { "snooze.revision": options.revision } : {}),
    "snooze.replica": options.replica,
  };
}

function splitAddress(address: string): [string, number | undefined] {
  const match = /^\[?([^\]]*?)\]?(?::(\d+))?$/.exec(address);
  if (!match) return [address, undefined];
  return [match[1]!, match[2] ? Number(match[2]) : undefined];
}
