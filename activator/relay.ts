import type { IncomingHttpHeaders, OutgoingHttpHeaders, ServerResponse } from "node:http";
import type { Dispatcher } from "undici";
import { clip } from "../lib/clip.ts";
import { timerValue } from "../lib/duration.ts";
import { contentCoding } from "../lib/http/content-encoding.ts";
import { noteErrorCode, sendError } from "../lib/http/json.ts";
import { doneEnd, endWithEvent, eventsEnd, maxHeldEventBytes } from "../lib/http/sse.ts";
import { closeUntakenTail, watchUntaken } from "../lib/http/untaken.ts";
import type { OpenAIErrorBody } from "../lib/openai-error.ts";
import { replaceEngineCors } from "./cors.ts";
import {
  engineErrorAnswer,
  engineErrorEvent,
  errorBodyText,
  maxEngineErrorBytes,
  readableCoding,
} from "./engine-error.ts";
import { endToEnd } from "./hop-headers.ts";
import {
  EndedEarly,
  errorAnswer,
  failureReason,
  InterimOnly,
  isHttpStatus,
  NotHttpStatus,
  UndecodedTransferCoding,
  type UpstreamFailure,
  undecodedTransferCoding,
} from "./upstream-failure.ts";

export type ForwardOutcome =
  | { kind: "answered"; status: number }
  /**
   * The engine answered nothing and no byte of an answer went to the client (hold progress may have
   * opened a stream): the request can be sent again, its body being read whole. The engine could
   * not be reached, its connection broke before an answer (it may have died under the request), or
   * Snooze ended the forward because the engine stopped answering. The caller must answer (or resend).
   */
  | { kind: "unanswered"; error: Error; reason: "connect-timeout" | "unreachable" | "unresponsive" }
  /** The forward failed and the client already got its answer: an error status, an SSE error event or a cut. */
  | { kind: "failed"; status: number; reason: UpstreamFailure; error: Error }
  | { kind: "aborted" };

export interface ForwardRequest {
  /** The normalised path to send (never the client's raw target). */
  path: string;
  body: Buffer;
  /** Sent over the client's own; one set to undefined is not sent at all (undici skips it). */
  extraHeaders: OutgoingHttpHeaders;
  /** Time to the engine's response headers; 0 is none. */
  firstByteTimeoutMs: number;
  /** Longest gap between body bytes; 0 is none. */
  idleTimeoutMs: number;
  /** Called once the engine's response headers arrived. */
  onResponse(): void;
  /** Sees the answer go by (tracing reads token usage from it); must not hold on to time. */
  tap?: { response(status: number, contentType: string): void; chunk(chunk: Buffer): void };
  /**
   * Registers how Snooze ends this forward early (shutdown, or its replica's drain time is over);
   * returns the unregister function.
   */
  onEnd(end: (why: EndedEarly) => void): () => void;
}

/**
 * How long an engine's error body may take to come whole after its head before the head is passed
 * on as it is: an error comes in one write; one that trickles is not held from the client.
 */
const errorBodyWaitMs = 1_000;

/**
 * How long an engine's stream may stay open after its `data: [DONE]` (the client's answer ended
 * there) before its request is given up: an engine ends it at once, on a connection kept for the
 * next request; one that does not would hold a place on it, and keep the model awake, for nothing.
 */
const afterDoneWaitMs = 1_000;

/** Headers that describe the engine's body bytes: dropped when the body is written anew. */
const bodyHeaders = [
  "content-encoding",
  "etag",
  "content-md5",
  "digest",
  "content-digest",
  "repr-digest",
  "content-range",
];

/** Client gone before the answer ended: the engine's request is cancelled with this. */
class ClientGone extends Error {
  constructor() {
    super("The client went away");
  }
}

/**
 * The client took none of the answer for the model's `idleTimeout`: it holds a place on the engine
 * (and keeps the model awake) for as long as it does not read. Its request ends as if it had gone.
 */
class ClientStalled extends Error {
  constructor() {
    super("The client took none of the answer within the model's idleTimeout");
  }
}

/**
 * undici's handler for one forward: each chunk of the engine's answer is written to the client
 * as undici parses it. A handler rather than `request()` and a loop over its body stream: that
 * puts a Readable, a promise and an iterator step between every chunk and its write.
 */
export class Relay implements Dispatcher.DispatchHandler {
  private readonly res: ServerResponse;
  private readonly request: ForwardRequest;
  private readonly done: (outcome: ForwardOutcome) => void;
  private controller?: Dispatcher.DispatchController;
  private abortReason?: Error;
  private status = 0;
  private contentType = "";
  /**
   * An engine's error answer, collected (up to maxEngineErrorBytes) to be put in OpenAI's shape: told
   * as one event at the end after hold progress opened an SSE stream, else as the answer itself.
   */
  private errorBody?: Buffer[];
  private errorBytes = 0;
  private errorCoding?: string;
  /** The headers of an error answer held back until its body is known (undefined in a stream). */
  private errorHead?: OutgoingHttpHeaders;
  /** An error body that does not come at once is not waited for: its head goes out. */
  private errorWait?: NodeJS.Timeout;
  /** An SSE answer: passed on event by event, so an ending Snooze adds follows a whole event. */
  private events = false;
  /**
   * A 200 that is not SSE, into a stream hold progress opened: passed on as the data of one event
   * (see `asEventData`); the last byte passed on was a CR (a CRLF cut between two reads).
   */
  private asEvent?: { afterCR: boolean };
  /** The start of an event whose end has not come yet (SSE answers only). */
  private partial?: Buffer;
  /** What went out last ends in the middle of an event (one longer than maxHeldEventBytes). */
  private midEvent = false;
  /**
   * A sized answer's headers (its status is `status`), written with its first body byte (or its
   * end): should the engine break off before that, nothing went out and the client is told why (502
   * upstream_broken, a drain's or shutdown's 503) rather than given an empty reply (found by an
   * outside tester).
   */
  private sizedHead?: OutgoingHttpHeaders;
  /** The head that went out declared a length: nothing may follow the engine's bytes. */
  private sizedOut = false;
  /**
   * The answer is compressed (`Content-Encoding`), passed on as it came: Snooze can neither find
   * its events nor add one (an error event in plain text inside gzip bytes is garbage to the client).
   */
  private compressed = false;
  /**
   * The client's answer ended with the engine's `data: [DONE]`: after it an OpenAI stream is over,
   * and nothing more is passed on. Armed to give the engine's request up if it does not end.
   */
  private afterDone?: NodeJS.Timeout;
  /** When the forward began: the engine's `firstByteTimeout` counts from here. */
  private readonly startedAt = performance.now();
  /** Armed at the first interim answer, which restarts undici's own headers timeout. */
  private interimWait?: NodeJS.Timeout;
  /** Stops the watch armed while the client does not take the answer (its socket's buffer full). */
  private unwatchStall: () => void = () => {};
  private readonly unregister: () => void;
  private readonly onClose = () => {
    if (!this.res.writableFinished) this.abort(new ClientGone());
  };
  private readonly resume = () => {
    this.unwatchStall();
    this.controller?.resume();
  };

  constructor(res: ServerResponse, request: ForwardRequest, done: (outcome: ForwardOutcome) => void) {
    this.res = res;
    this.request = request;
    this.done = done;
    res.once("close", this.onClose);
    this.unregister = request.onEnd((why) => this.abort(why));
  }

  private abort(reason: Error): void {
    if (this.abortReason) return;
    this.abortReason = reason;
    // Before undici started the request there is no controller yet: onRequestStart aborts then.
    this.controller?.abort(reason);
  }

  private finish(outcome: ForwardOutcome): void {
    this.unwatchStall();
    clearTimeout(this.afterDone);
    clearTimeout(this.interimWait);
    this.unregister();
    this.res.off("close", this.onClose);
    this.res.off("drain", this.resume);
    // The engine's part is over, but the answer's last bytes (or the error event that ended it) may
    // still wait for a client that takes none of them: watched as long, and closed the same way.
    closeUntakenTail(this.res, timerValue(this.request.idleTimeoutMs));
    this.done(outcome);
  }

  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.abortReason) controller.abort(this.abortReason);
  }

  onResponseStart(
    controller: Dispatcher.DispatchController,
    status: number,
    headers: IncomingHttpHeaders,
  ): void {
    // A status HTTP does not have (`HTTP/1.1 000`, `799`) is not passed on: the client is told the
    // engine's answer is not HTTP (502 upstream_error). `status` stays 0: nothing was answered.
    if (!isHttpStatus(status)) {
      controller.abort(new NotHttpStatus(status));
      return;
    }
    // Nor one whose body is coded in a way undici does not take off (`gzip, chunked`): its bytes would
    // go out as the body, a 200 of gzip the client reads as JSON (found by an outside tester).
    const transfer = headers["transfer-encoding"];
    if (status >= 200 && transfer !== undefined && undecodedTransferCoding(transfer)) {
      controller.abort(new UndecodedTransferCoding(transfer));
      return;
    }
    // An interim answer (103 Early Hints): the answer itself follows on the same request. Passed on,
    // it would go out as the client's final status and the answer after it would be lost.
    if (status < 200) {
      this.keepFirstByteClock(controller);
      return;
    }
    clearTimeout(this.interimWait);
    const { res, request } = this;
    const encoding = contentCoding(headers["content-encoding"]);
    // Hold progress answered already, uncompressed, and asked the engine for identity (proxy.ts):
    // compressed bytes cannot go into that stream, and a success is not read whole to decode it.
    if (res.headersSent && status === 200 && encoding !== undefined) {
      controller.abort(new CompressedIntoStream(encoding));
      return;
    }
    this.status = status;
    this.contentType = String(headers["content-type"] ?? "");
    // A compressed stream is passed on as it comes: its events' ends are not in its bytes (before,
    // looked for there, the whole stream was held back until it ended; found by an outside tester).
    this.events =
      status === 200 &&
      encoding === undefined &&
      this.contentType.toLowerCase().includes("text/event-stream");
    request.tap?.response(status, this.contentType);
    request.onResponse();
    if (res.headersSent) {
      // Hold progress already answered 200 and opened an SSE stream: an engine error can
      // only be told as an event in it.
      const sse = this.events;
      this.contentType = "text/event-stream";
      this.events = true;
      if (status !== 200) {
        this.errorBody = [];
        this.errorCoding = encoding;
      } else if (!sse) {
        // Nor can an answer that is not SSE (an engine that ignores `stream`): as raw bytes in the
        // stream, an SSE parser would drop it, and the answer would be lost without a word.
        this.events = false;
        this.asEvent = { afterCR: false };
        this.midEvent = true;
        res.write("data: ");
      }
      return;
    }
    this.compressed = encoding !== undefined;
    const out = endToEnd(headers);
    // With --allowed-origins the browser sees Snooze's CORS answer (server.ts), not the engine's too.
    if (res.hasHeader("access-control-allow-origin")) replaceEngineCors(out);
    // An SSE answer goes on without its length, as a stream: an error event Snooze ends it with
    // after a break would be bytes past a declared length, and the client would wait for the rest
    // of the declared bytes, for ever (found by an outside tester). A 204 has no body, and RFC 9110
    // §8.6 forbids its Content-Length: an engine's passed on left a client that reads it waiting for
    // bytes that never come (found by an outside tester).
    const length = this.events || status === 204 ? undefined : headers["content-length"];
    if (typeof length === "string") {
      // A sized body is passed on untouched, so its length stays true: keeping it saves the
      // chunked framing, and headers and body leave in one write instead of three.
      out["content-length"] = length;
    }
    if (status >= 400 && readableCoding(encoding)) {
      // Read before it is passed on: an error not in OpenAI's shape is put in it (engine-error.ts).
      this.errorBody = [];
      this.errorCoding = encoding;
      this.errorHead = out;
      this.errorWait = setTimeout(() => this.releaseErrorHead(), errorBodyWaitMs);
      return;
    }
    // A stream (no length) shows its headers at once, as the engine sent them.
    if (typeof length !== "string") {
      res.writeHead(status, out);
      res.flushHeaders();
    } else this.sizedHead = out;
  }

  /**
   * An interim answer came: undici's headers timeout starts again with each, so the engine's
   * `firstByteTimeout` is kept from the forward's start here, until the answer's head.
   */
  private keepFirstByteClock(controller: Dispatcher.DispatchController): void {
    const timeoutMs = this.request.firstByteTimeoutMs;
    if (this.interimWait || timeoutMs <= 0) return;
    const leftMs = Math.max(0, timeoutMs - (performance.now() - this.startedAt));
    this.interimWait = setTimeout(() => controller.abort(new InterimOnly()), leftMs);
  }

  /** The sized answer's head, now that its body comes (or it ended). */
  private writeSizedHead(): void {
    if (!this.sizedHead) return;
    this.res.writeHead(this.status, this.sizedHead);
    this.sizedHead = undefined;
    this.sizedOut = true;
  }

  onResponseData(controller: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.afterDone) return;
    if (this.errorBody) {
      // Too big for an error message: a held-back answer goes out untouched, as it comes.
      if (this.errorHead && this.errorBytes + chunk.length > maxEngineErrorBytes) this.releaseErrorHead();
      else {
        const room = maxEngineErrorBytes - this.errorBytes;
        if (room > 0) this.errorBody.push(room < chunk.length ? chunk.subarray(0, room) : chunk);
        this.errorBytes += Math.min(room, chunk.length);
        return;
      }
    }
    this.request.tap?.chunk(chunk);
    this.writeSizedHead();
    const whole = this.asEvent
      ? asEventData(chunk, this.asEvent)
      : this.events
        ? this.wholeEvents(chunk)
        : chunk;
    const done = this.events ? doneEnd(whole) : -1;
    if (done >= 0) {
      this.endAtDone(whole.subarray(0, done));
      return;
    }
    if (whole.length > 0 && !this.res.write(whole) && !controller.paused) {
      controller.pause();
      this.res.once("drain", this.resume);
      this.watchStall();
    }
  }

  /**
   * The engine's `data: [DONE]` ends the client's answer: OpenAI's clients read a stream to its end
   * even past [DONE], so an engine that kept it open kept them waiting, and its idle timeout then
   * wrote an error event after [DONE] (found by an outside tester). What the engine sends after it
   * is not passed on; its request is let go when it ends, or after `afterDoneWaitMs`.
   */
  private endAtDone(last: Buffer): void {
    this.partial = undefined;
    this.midEvent = false;
    this.res.end(last);
    this.afterDone = setTimeout(
      () => this.abort(new Error("The stream was over at its [DONE]")),
      afterDoneWaitMs,
    );
  }

  /**
   * What of `chunk` ends an event (with the part held back before it); the rest is held back. An
   * engine read cut mid-event (a client reading slowly gets many events per read) would otherwise
   * leave half an event before the error event Snooze ends a stream with, and the client's parser
   * would fail on it instead of reading the error (found by an outside tester).
   */
  private wholeEvents(chunk: Buffer): Buffer {
    const joined = this.partial ? Buffer.concat([this.partial, chunk]) : chunk;
    const end = eventsEnd(joined);
    this.partial = end < joined.length ? joined.subarray(end) : undefined;
    // What goes out now ends an event, unless the event is too long to hold.
    if (end > 0) this.midEvent = false;
    if (this.partial && this.partial.length > maxHeldEventBytes) {
      this.partial = undefined;
      this.midEvent = true;
      return joined;
    }
    return end === joined.length ? joined : joined.subarray(0, end);
  }

  /**
   * The client's socket is full: if it takes nothing more within the model's idleTimeout, its
   * request ends (the engine's request with it) and its connection is closed. A client reading
   * slowly keeps it alive: what it takes empties the socket's queue, which is checked each time.
   */
  private watchStall(): void {
    this.unwatchStall();
    this.unwatchStall = watchUntaken(this.res, timerValue(this.request.idleTimeoutMs), () => {
      this.abort(new ClientStalled());
      this.res.destroy();
    });
  }

  onResponseEnd(): void {
    if (this.afterDone) {
      this.finish({ kind: "answered", status: this.status });
      return;
    }
    clearTimeout(this.errorWait);
    const body = this.errorBody && Buffer.concat(this.errorBody);
    this.writeSizedHead();
    if (this.partial) this.res.write(this.partial);
    if (this.asEvent) this.res.end("\n\ndata: [DONE]\n\n");
    else if (!body) this.res.end();
    else if (!this.errorHead) {
      // A body that cannot be decoded says nothing readable: only the status is told.
      const text = errorBodyText(body, this.errorCoding) ?? "";
      endWithEvent(this.res, engineErrorEvent(this.status, text));
    } else this.endError(body, this.errorHead);
    this.finish({ kind: "answered", status: this.status });
  }

  /** A whole error answer, held back: in OpenAI's shape if it was not, else as the engine sent it. */
  private endError(body: Buffer, head: OutgoingHttpHeaders): void {
    const text = errorBodyText(body, this.errorCoding);
    const reshaped = text === undefined ? undefined : engineErrorAnswer(this.status, text);
    const out = reshaped === undefined ? body : Buffer.from(reshaped);
    const sent: OutgoingHttpHeaders = { ...head, "content-length": String(out.length) };
    if (reshaped !== undefined) {
      sent["content-type"] = "application/json";
      // They described the engine's bytes, not these.
      for (const name of bodyHeaders) delete sent[name];
    }
    this.request.tap?.chunk(out);
    this.res.writeHead(this.status, sent);
    this.res.end(out);
  }

  /**
   * An error answer held back that is too big to reshape, or slow to come: its head and what was
   * read go out now, the rest as it comes.
   */
  private releaseErrorHead(): void {
    clearTimeout(this.errorWait);
    if (!this.errorHead) return;
    this.res.writeHead(this.status, this.errorHead);
    this.sizedOut = this.errorHead["content-length"] !== undefined;
    // Out now, even before a body byte comes (a sized answer's head waits for its body otherwise).
    this.res.flushHeaders();
    for (const part of this.errorBody ?? []) {
      this.request.tap?.chunk(part);
      this.res.write(part);
    }
    this.errorBody = undefined;
    this.errorHead = undefined;
  }

  onResponseError(_controller: Dispatcher.DispatchController | null, error: Error): void {
    // After [DONE] the client had its whole answer: whatever ends the engine's request (it went
    // quiet, it was given up, the client left) is not the client's to hear.
    if (this.afterDone) {
      this.finish({ kind: "answered", status: this.status });
      return;
    }
    // An error answer held back and cut part way: nothing went out, so the client is told why
    // (502 upstream_broken, 504 upstream_idle_timeout …) rather than left with a closed connection.
    clearTimeout(this.errorWait);
    // An event too long to hold went out in part: a blank line ends it, so the error event that
    // follows is an event of its own (found by an outside tester).
    if (this.midEvent && !this.res.writableEnded && !this.res.destroyed) this.res.write("\n\n");
    const sealed = this.sizedOut || this.compressed;
    this.finish(failed(this.res, this.abortReason, this.status, this.contentType, error, sealed));
  }
}

/** Classifies a failed forward and ends the client's response accordingly. */
function failed(
  res: ServerResponse,
  abortReason: Error | undefined,
  status: number,
  contentType: string,
  error: Error,
  sealed: boolean,
): ForwardOutcome {
  const ended = abortReason instanceof EndedEarly ? abortReason : undefined;
  if (abortReason && !ended) return { kind: "aborted" };
  const reason = failureReason(error, status, ended);
  // The engine answered nothing: the caller sends the request once more (having the engine
  // re-checked, unless the control plane found it unresponsive already), into a stream hold
  // progress opened too (it ends that stream with the error if the resend fails as well).
  if (
    status === 0 &&
    (reason === "unreachable" || reason === "connect-timeout" || reason === "unresponsive")
  ) {
    return { kind: "unanswered", error, reason };
  }
  const answer = errorAnswer(reason, error, ended ?? error);
  // Nothing of an answer went out yet (hold progress may have opened a stream already, though).
  if (!res.headersSent) {
    sendError(res, answer.status, answer.body, answer.headers);
    return { kind: "failed", status: answer.status, reason, error };
  }
  // Headers out before the engine's (status 0) are hold progress's, whose stream is SSE. Not read
  // back with getHeader: it does not see a head given to writeHead alone, and the stream was cut.
  // The answer's status went out, then the answer failed: its server span names why (the error
  // event's code, or the cut's), as it does a 5xx (found by an outside tester: an engine that died
  // mid-stream left a server span with no error at all, only its CLIENT span said so).
  noteErrorCode(res, answer.body);
  endBroken(res, status === 0 ? "text/event-stream" : contentType, answer.body, error, sealed);
  return { kind: "failed", status: status || 200, reason, error };
}

/**
 * An SSE client gets a final error event it can show; anything else sees the connection end early.
 * `sealed`: nothing may be added to what went out (it declared a length, or it is compressed).
 */
function endBroken(
  res: ServerResponse,
  contentType: string,
  body: OpenAIErrorBody,
  error: Error,
  sealed: boolean,
): void {
  if (res.writableEnded || res.destroyed) return;
  // Not past a declared length (an error answer labelled SSE, sized): the client would wait for
  // the rest of the declared bytes for ever. Nor in plain text inside compressed bytes.
  if (contentType.includes("text/event-stream") && !sealed) endWithEvent(res, JSON.stringify(body));
  else res.destroy(error);
}

/**
 * A success the engine compressed though asked for identity, into a stream hold progress opened:
 * told as an `upstream_error` event rather than passed on as bytes the client cannot read.
 */
class CompressedIntoStream extends Error {
  constructor(coding: string) {
    super(
      `the engine answered compressed (Content-Encoding: ${clip(coding, 40)}) though it was asked for identity, into a stream already open`,
    );
  }
}

/**
 * Bytes of an answer that is not SSE as the data of one SSE event (the caller wrote `data: ` before
 * the first): each line break starts a new `data:` line, which an SSE parser joins with `\n` again,
 * so the client reads the engine's answer (JSON keeps its meaning). A CRLF cut between two reads
 * is one line break, not two.
 */
function asEventData(chunk: Buffer, state: { afterCR: boolean }): Buffer {
  let text = chunk.toString("latin1");
  if (state.afterCR && text.startsWith("\n")) text = text.slice(1);
  state.afterCR = text.endsWith("\r");
  return Buffer.from(text.replace(/\r\n|\r|\n/g, "\ndata: "), "latin1");
}
