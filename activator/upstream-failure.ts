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

/** Errors of this process, not the engine's: the client may retry in a moment. */
const localResourceCodes = new Set(["EMFILE", "ENFILE", "ENOBUFS", "ENOMEM", "EADDRNOTAVAIL"]);

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
  if (localResourceCodes.has(code)) return "local-resources";
  if (status === 0 && unreachableCodes.has(code)) return "unreachable";
  return status !== 0 ? "broken" : "error";
}

/** The answer for a failure before any byte, or the SSE error event for one after. */
export function errorAnswer(
  reason: UpstreamFailure,
  error: Error,
  cause: Error = error,
): { status: number; body: OpenAIErrorBody; headers?: Record<string, string> } {
  switch (reason) {
    case "shutdown":
      return {
        status: 503,
        body: openAIError(`${cause.message}; retry.`, "service_unavailable_error", "shutting_down"),
        headers: { "retry-after": "5", connection: "close" },
      };
    case "drained":
      return {
        status: 503,
        body: openAIError(`${cause.message}; retry.`, "service_unavailable_error", "drain_timeout"),
        headers: { "retry-after": "5" },
      };
    case "unresponsive":
      return {
        status: 502,
        body: openAIError(`${cause.message}; retry.`, "server_error", "upstream_unresponsive"),
      };
    case "connect-timeout":
      return {
        status: 504,
        body: openAIError(
          `Connecting to the engine timed out: ${error.message}`,
          "server_error",
          "upstream_connect_timeout",
        ),
      };
    case "first-byte-timeout":
      return {
        status: 504,
        body: openAIError(
          "The engine did not start its answer within the model's firstByteTimeout.",
          "server_error",
          "upstream_timeout",
        ),
      };
    case "idle-timeout":
      return {
        status: 504,
        body: openAIError(
          "The engine sent nothing for longer than the model's idleTimeout.",
          "server_error",
          "upstream_idle_timeout",
        ),
      };
    case "local-resources":
      return {
        status: 503,
        body: openAIError(
          `The activator is out of resources to reach the engine (${(error as { code?: string }).code}); retry.`,
          "service_unavailable_error",
          "activator_overloaded",
        ),
        headers: { "retry-after": "1" },
      };
    case "unreachable":
      return {
        status: 502,
        body: openAIError(
          `The engine could not be reached: ${error.message}`,
          "server_error",
          "upstream_unreachable",
        ),
      };
    case "broken":
      return {
        status: 502,
        body: openAIError(
          `The engine stopped in the middle of the response: ${error.message}`,
          "server_error",
          "upstream_broken",
        ),
      };
    default:
      return {
        status: 502,
        body: openAIError(
          `The call to the engine failed: ${error.message}`,
          "server_error",
          "upstream_error",
        ),
      };
  }
}
