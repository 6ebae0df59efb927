import type { Server, ServerResponse } from "node:http";
import type { Duplex } from "node:stream";
import { type OpenAIErrorBody, openAIError } from "../openai-error.ts";

/** What Node's parser could not take, and how to say so: status, reason phrase, code, message. */
function answerFor(code: string | undefined): [number, string, string, string] | undefined {
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      return [
        431,
        "Request Header Fields Too Large",
        "request_headers_too_large",
        "The request's headers are larger than this server takes (16 KiB in all); send fewer or smaller headers.",
      ];
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return [408, "Request Timeout", "request_timeout", "The request was not received in time."];
    case "ECONNRESET":
    case "EPIPE":
      return undefined;
    default:
      return code?.startsWith("HPE_")
        ? [400, "Bad Request", "malformed_request", "The request is not well-formed HTTP/1.1."]
        : undefined;
  }
}

/**
 * Requests Node's HTTP parser refuses (headers too large, malformed, too slow) never reach a
 * handler; Node answers them with a bare status line. This answers them the way every other refusal
 * is answered, an OpenAI-shaped error a client can show, then closes the connection (its bytes
 * cannot be read as a next request). Like Node, it writes only while no answer has begun on the
 * socket.
 */
export function answerClientErrors(server: Server): void {
  server.on("clientError", (error: Error & { code?: string }, socket: Duplex) => {
    const answer = answerFor(error.code);
    const current = (socket as { _httpMessage?: ServerResponse | null })._httpMessage;
    if (!answer || !socket.writable || current?.headersSent) {
      socket.destroy();
      return;
    }
    const [status, phrase, code, message] = answer;
    endSocketWithError(socket, `${status} ${phrase}`, openAIError(message, "invalid_request_error", code));
  });
}

/**
 * Writes a whole answer straight to a socket no response object owns (a parse failure, CONNECT)
 * and closes it: `status` is the status line's code and phrase, e.g. "405 Method Not Allowed".
 */
export function endSocketWithError(
  socket: Duplex,
  status: string,
  error: OpenAIErrorBody,
  headers: Record<string, string> = {},
): void {
  const body = JSON.stringify(error);
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.on("error", () => {});
  // Closed once written, not only half-closed: a request pipelined before this one (held for its
  // model, say) must see its client go, as Node's own answer would have it.
  socket.once("finish", () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status}\r\n${lines.join("")}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
