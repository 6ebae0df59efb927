import { clip } from "../lib/clip.ts";
import { transferCodings } from "../lib/http/content-encoding.ts";
import { localResourceCodes } from "../lib/http/local-resources.ts";
import { http } from "../lib/node-http.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/** Why a forward failed, as counted in `snooze_upstream_errors_total{reason}`. */
export type UpstreamFailure =
  /** Connecting took longer than `connectTimeout`. */
  | "connect-timeout"
  /** Refused, reset or unreachable before any byte of an answer. */
  | "unreachable"
  /** No answer within `firstByteTimeout` of dispatch. */
  | "first-byte-timeout"
  /** The answer stopped for longer than `idleTimeout`. */
  | "idle-timeout"
  /** The answer broke off after it started. */
  | "broken"
  /** This process ran out of file descriptors, ports or buffers. */
  | "local-resources"
  /** Snooze shut down before the answer ended. */
  | "shutdown"
  /** The replica's drain time was over before the answer ended: it goes to sleep or stops. */
  | "drained"
  /** The engine stopped answering (it failed a health check) and is being replaced. */
  | "unresponsive"
  /** Anything else before an answer (a client library error, a malformed answer). */
  | "error";

/** Errors of a connection that never carried an answer: the engine may be gone. */
const unreachableCodes = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "UND_ERR_SOCKET",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EHOSTDOWN",
  "ENOTFOUND",
  "EAI_AGAIN",
]);

/**
 * Of those, the errors of a connection that broke once made: the engine had the request (or was
 * about to) and went, or dropped it, before answering.
 */
const brokenCodes = new Set(["ECONNRESET", "EPIPE", "UND_ERR_SOCKET"]);

/** Why Snooze itself ended a forward before its answer ended; the client is told this, not cut. */
export class EndedEarly extends Error {
  readonly reason: "shutdown" | "drained" | "unresponsive";
  constructor(reason: EndedEarly["reason"], message: string) {
    super(message);
    this.reason = reason;
  }
}

/** Which failure an error of undici's is; `ended` when Snooze itself ended the forward. */
export function failureReason(error: Error, status: number, ended: EndedEarly | undefined): UpstreamFailure {
  const code = (error as { code?: string }).code ?? "";
  if (ended) return ended.reason;
  if (code === "UND_ERR_CONNECT_TIMEOUT") return "connect-timeout";
  if (code === "UND_ERR_HEADERS_TIMEOUT") return "first-byte-timeout";
  if (code === "UND_ERR_BODY_TIMEOUT") return "idle-timeout";
  // Errors of this process, not the engine's: the client may retry in a moment.
  if (localResourceCodes.has(code)) return "local-resources";
  if (status === 0 && unreachableCodes.has(code) && !isUnaskedUpgrade(error)) return "unreachable";
  return status !== 0 ? "broken" : "error";
}

/** What the client is told of each failure: the status, OpenAI's error type and code, the words. */
interface FailureAnswer {
  status: number;
  type: string;
  code: string;
  /** `error` is undici's; `cause` is what Snooze ended the forward with (shutdown, drain). */
  message(error: Error, cause: Error): string;
  headers?: Readonly<Record<string, string>>;
}

const unavailable = "service_unavailable_error";
const failureAnswers: Readonly<Record<UpstreamFailure, FailureAnswer>> = {
  shutdown: {
    status: 503,
    type: unavailable,
    code: "shutting_down",
    message: (_, cause) => `${cause.message}; retry.`,
    headers: { "retry-after": "5", connection: "close" },
  },
  drained: {
    status: 503,
    type: unavailable,
    code: "drain_timeout",
    message: (_, cause) => `${cause.message}; retry.`,
    headers: { "retry-after": "5" },
  },
  unresponsive: {
    status: 502,
    type: "server_error",
    code: "upstream_unresponsive",
    message: (_, cause) => `${cause.message}; retry.`,
  },
  "connect-timeout": {
    status: 504,
    type: "server_error",
    code: "upstream_connect_timeout",
    message: (error) => `Connecting to the engine timed out: ${error.message}`,
  },
  "first-byte-timeout": {
    status: 504,
    type: "server_error",
    code: "upstream_timeout",
    message: () => "The engine did not start its answer within the model's firstByteTimeout.",
    // The engine had the request and may still be generating it: OpenAI's clients retry a 504 on
    // their own (twice by default), each retry the whole generation again, so they are told not to
    // (found by an outside tester). A request that timed out while held never reached an engine:
    // that is `hold_budget_exceeded`, a 503 whose retry is right, and it has no such header.
    headers: { "x-should-retry": "false" },
  },
  "idle-timeout": {
    status: 504,
    type: "server_error",
    code: "upstream_idle_timeout",
    message: () => "The engine sent nothing for longer than the model's idleTimeout.",
  },
  "local-resources": {
    status: 503,
    type: unavailable,
    code: "activator_overloaded",
    message: (error) =>
      `The activator is out of resources to reach the engine (${(error as { code?: string }).code}); retry.`,
    headers: { "retry-after": "1" },
  },
  unreachable: {
    status: 502,
    type: "server_error",
    code: "upstream_unreachable",
    message: (error) => `The engine could not be reached: ${error.message}`,
  },
  broken: {
    status: 502,
    type: "server_error",
    code: "upstream_broken",
    message: (error) => `The engine stopped in the middle of the response: ${error.message}`,
  },
  error: {
    status: 502,
    type: "server_error",
    code: "upstream_error",
    message: (error) => `The call to the engine failed: ${readable(error)}`,
  },
};

/**
 * An error's words for the client. undici checks some of what an engine sends with `assert` (a
 * status line's code below 100, `HTTP/1.1 000`, before the relay checked statuses itself); its
 * message, "The expression evaluated to a falsy value: assert(statusCode >= 100)", said nothing a
 * client could use (found by an outside tester).
 */
function readable(error: Error): string {
  const code = (error as { code?: string }).code ?? "";
  // The parser's reason, which undici words "Response does not match the HTTP/1.1 protocol (…)"
  // (its HTTPParserError has no code for most).
  if (error.name === "HTTPParserError") return notHttp(/\((.+)\)$/.exec(error.message)?.[1]);
  // undici reports any failure to parse a head once it read a Content-Length in it as this
  // mismatch, dropping the parser's reason. Only such a head is told here: a body that broke off
  // came after an answer's head, and is `broken`, not an error. Before, its words ("its body and its
  // Content-Length do not agree ... two Content-Lengths that differ") were wrong for a control
  // character or a folded line after the length, and for two equal lengths (found by an outside tester).
  if (code === "UND_ERR_RES_CONTENT_LENGTH_MISMATCH")
    return notHttp(
      "its head is malformed after its Content-Length: a second Content-Length, a control character in a header, or a header line folded onto the next, say",
    );
  // The head is HTTP, only longer than undici reads (Node's `--max-http-header-size`); undici's
  // words, "Headers Overflow Error", did not say whose head or how long (found by an outside tester).
  if (code === "UND_ERR_HEADERS_OVERFLOW")
    return `the engine's answer has a head larger than the ${http.maxHeaderSize} bytes Snooze reads of one`;
  if (isUnaskedUpgrade(error))
    return notHttp("it switched protocols (101) though the request asked for no upgrade");
  if (code !== "ERR_ASSERTION") return error.message;
  const check = /assert\((.*)\)/.exec(error.message)?.[1];
  return notHttp(check && `the HTTP client's check \`${check}\` failed`);
}

/**
 * The engine answered `101 Switching Protocols` to a request that asked for no upgrade: undici
 * closes the connection with a "bad upgrade" socket error. An answer, though not HTTP's: not a
 * connection that broke under the request, which would send it again.
 */
const isUnaskedUpgrade = (error: Error) =>
  (error as { code?: string }).code === "UND_ERR_SOCKET" && error.message === "bad upgrade";

/** The words for an engine's answer that is not HTTP, and why when known. */
const notHttp = (why: string | undefined) => `the engine's answer is not valid HTTP${why ? ` (${why})` : ""}`;

/**
 * Whether a final status is one HTTP has: RFC 9110 §15 puts every status within 100–599. undici
 * passes one of 600–999 on (it fails one below 100 only once the answer is read, by an assert), and
 * passed through (`HTTP/1.1 799 Weird`) it reached OpenAI's clients as a status they cannot read
 * (found by an outside tester).
 */
export const isHttpStatus = (status: number): boolean => status >= 100 && status <= 599;

/**
 * The engine sent interim answers (1xx: 102 Processing, 103 Early Hints) and no answer within the
 * model's `firstByteTimeout` of dispatch. undici starts its headers timeout again at each interim
 * answer, so an engine (or a proxy before it) that sends them now and then held the request for as
 * long as it kept on (found by an outside tester). Told as that timeout: the code is undici's.
 */
export class InterimOnly extends Error {
  readonly code = "UND_ERR_HEADERS_TIMEOUT";
  constructor() {
    super("The engine sent only interim answers (1xx) within the model's firstByteTimeout");
  }
}

/** The error a forward whose engine answered a status HTTP does not have ends with (`isHttpStatus`). */
export class NotHttpStatus extends Error {
  constructor(status: number) {
    // As the status line wrote it (`000`, `099`), not as a number.
    super(notHttp(`its status ${String(status).padStart(3, "0")} is not within 100–599`));
  }
}

/**
 * The transfer codings of an engine's `Transfer-Encoding` that undici does not take off (any but
 * chunked; `identity`, RFC 2616's, changes nothing). Their bytes would pass on as the body, without a
 * header that says how they are coded: a `200` of gzip bytes the client reads as JSON. The engine may
 * not send one to a request without `TE` (RFC 9112 §6.1), and Snooze sends none.
 */
export function undecodedTransferCoding(header: string | string[] | undefined): boolean {
  return transferCodings(header).some(
    (coding) => coding !== "" && coding !== "chunked" && coding !== "identity",
  );
}

/** The error a forward whose engine answered with a transfer coding it does not decode ends with. */
export class UndecodedTransferCoding extends Error {
  constructor(header: string | string[]) {
    super(
      `the engine's answer is sent with Transfer-Encoding: ${clip(String(header), 80)}, and Snooze decodes only chunked (RFC 9112 §6.1: no other transfer coding is sent to a request without TE)`,
    );
  }
}

/** The answer for a failure before any byte, or the SSE error event for one after. */
export function errorAnswer(
  reason: UpstreamFailure,
  error: Error,
  cause: Error = error,
): { status: number; body: OpenAIErrorBody; headers?: Record<string, string> } {
  const answer = failureAnswers[reason];
  return {
    status: answer.status,
    body: openAIError(answer.message(error, cause), answer.type, answer.code),
    ...(answer.headers ? { headers: { ...answer.headers } } : {}),
  };
}

/**
 * Whether a forward that got no answer failed under the request, rather than before reaching the
 * engine: its connection broke once made (the engine died, or dropped it), or Snooze ended it
 * because the engine stopped answering. Such a request may itself be what made the engine fail.
 */
export function failedUnder(reason: UpstreamFailure, error: Error): boolean {
  if (reason === "unresponsive") return true;
  return reason === "unreachable" && brokenCodes.has((error as { code?: string }).code ?? "");
}

/**
 * The answer for a request whose engine failed under it on its last try, with no byte of an
 * answer (`failedUnder`), after it had been sent again once already: `exit` is how that engine
 * went, when the control plane said.
 */
export function failedUnderAnswer(
  model: string,
  reason: UpstreamFailure,
  error: Error,
  exit: string | undefined,
): { status: number; body: OpenAIErrorBody; headers: Record<string, string> } {
  const how =
    reason === "unresponsive"
      ? "it stopped answering and is being replaced"
      : `its connection closed: ${error.message}`;
  return {
    status: 502,
    body: openAIError(
      `The engine of model \`${model}\` failed under this request before answering (${how}${exit ? `; ${exit}` : ""}). ` +
        "The request was already sent again once, after an earlier failure, and is not sent again: it may itself be what makes the engine fail.",
      "server_error",
      "upstream_died",
    ),
    // OpenAI's clients retry a 502 on their own (twice by default), and each retry would cost two
    // more engines: this header is what both SDKs obey over the status (found by an outside tester).
    headers: { "x-should-retry": "false" },
  };
}
