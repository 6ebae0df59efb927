import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { Socket } from "node:net";
import type { Duplex } from "node:stream";
import { escapeLineBreakers } from "../json-line.ts";
import { type OpenAIErrorBody, openAIError } from "../openai-error.ts";
import { lingerIdleMs, lingerMaxMs } from "./linger.ts";
import { requestIdInRaw } from "./request-id.ts";

/**
 * An HTTP/2 client with prior knowledge (`curl --http2-prior-knowledge`, an h2c-only library)
 * opens with this preface, which Node's HTTP/1 parser refuses. An HTTP/1.1 error is noise to such
 * a client ("Empty reply from server"); RFC 9113 has the answer it reads: the server's SETTINGS
 * (the preface every HTTP/2 server sends first), then GOAWAY with HTTP_1_1_REQUIRED, whose debug
 * data says it in words (counted as a 505). No stream was processed (last stream 0), so the
 * client may send again over HTTP/1.1.
 */
const H2_PREFACE_REFUSED = "HPE_PAUSED_H2_UPGRADE";
const H2_MESSAGE = "Snooze serves HTTP/1.1 only: send the request without HTTP/2 prior knowledge.";

function h2Refusal(): Buffer {
  const settings = Buffer.from([0, 0, 0, 0x4, 0, 0, 0, 0, 0]); // empty SETTINGS, stream 0
  const debug = Buffer.from(H2_MESSAGE);
  const goaway = Buffer.alloc(9 + 8 + debug.length);
  goaway.writeUIntBE(8 + debug.length, 0, 3); // length
  goaway[3] = 0x7; // GOAWAY; flags 0, stream 0
  goaway.writeUInt32BE(0, 9); // last stream id
  goaway.writeUInt32BE(0xd, 13); // HTTP_1_1_REQUIRED
  debug.copy(goaway, 17);
  return Buffer.concat([settings, goaway]);
}

/**
 * Whether the 16 KiB the parser takes were spent by the request target: Node counts the target
 * once it is whole, so the parser stopped right before the space that ends it (` HTTP/1.1`).
 * Headers that overflow stop it elsewhere.
 */
function targetOverflowed(error: ParseError): boolean {
  return (
    error.bytesParsed !== undefined &&
    error.rawPacket?.toString("latin1", error.bytesParsed, error.bytesParsed + 6) === " HTTP/"
  );
}

type ParseError = Error & { code?: string; reason?: string; rawPacket?: Buffer; bytesParsed?: number };

/** What Node's parser could not take, and how to say so: status, reason phrase, code, message. */
function answerFor(error: ParseError): [number, string, string, string] | undefined {
  const { code, reason } = error;
  switch (code) {
    case "HPE_HEADER_OVERFLOW":
      // A long URL told to send fewer headers would look for the wrong fault (found by an outside
      // tester: a 20 KB query string was answered "send fewer or smaller headers").
      if (targetOverflowed(error))
        return [
          414,
          "URI Too Long",
          "uri_too_long",
          "The request's target (its path and query string) is longer than this server takes (16 KiB with the headers); send a shorter URL: an OpenAI request carries its input in the JSON body.",
        ];
      // Node refuses more than 1,000 header fields the same way, however small (found by an outside
      // tester: 1,001 headers of 5 KB in all were told they passed 16 KiB).
      return [
        431,
        "Request Header Fields Too Large",
        "request_headers_too_large",
        "The request's headers are more than this server takes (16 KiB in all, and at most 1000 header fields); send fewer or smaller headers.",
      ];
    case "ERR_HTTP_REQUEST_TIMEOUT":
      return [408, "Request Timeout", "request_timeout", "The request was not received in time."];
    case H2_PREFACE_REFUSED:
      // Not the connection's opening (that is answered in HTTP/2, below): an HTTP/1.1 client's
      // bytes, told as such rather than in the parser's words ("Pause on PRI/Upgrade").
      return [
        400,
        "Bad Request",
        "malformed_request",
        "The request is not well-formed HTTP/1.1: an HTTP/2 connection preface after HTTP/1.1 requests.",
      ];
    case "ECONNRESET":
    case "EPIPE":
      return undefined;
    default:
      // The parser's own words say what was wrong ("Duplicate Content-Length", "Invalid character
      // in chunk size"): a client told only "not well-formed" has to guess which of its bytes.
      return code?.startsWith("HPE_")
        ? [
            400,
            "Bad Request",
            "malformed_request",
            `The request is not well-formed HTTP/1.1${reason ? `: ${reason}` : ""}.`,
          ]
        : undefined;
  }
}

/** Bytes written on the connection so far (0 before its first answer). */
const bytesWritten = (socket: Duplex) => (socket as Partial<Socket>).bytesWritten ?? 0;

/** The response Node has on the socket now (the oldest one not yet finished), if any. */
const currentResponse = (socket: Duplex) =>
  (socket as { _httpMessage?: (ServerResponse & { req?: IncomingMessage }) | null })._httpMessage ??
  undefined;

/**
 * Refused connections whose client's last bytes are being read and dropped, each with what marks
 * the client as still sending: the parser, left in its error state, refuses each later read again
 * (a 'clientError' per read; its reads never reach 'data' listeners), and that is the sign.
 */
const lingering = new WeakMap<Duplex, () => void>();

/**
 * Closes a refused connection once its client has closed its side, or sent nothing for
 * `lingerIdleMs` (`lingerMaxMs` in all), reading and dropping what it still sends meanwhile.
 * Closed at once, the connection had the client's later bytes unread or arriving after it, and the
 * kernel reset it: the client saw "Broken pipe" or "Connection reset" on its next write, and never
 * read the answer that says why. An HTTP/2 client writes its request's frames right after the
 * preface, without waiting for an answer (found by an outside tester: Python's httpx with
 * `http2=True, http1=False`, and OpenAI's Python SDK over it, got a bare connection error nine times
 * in ten); an HTTP/1.1 client whose upload the parser refused (a bad chunk) goes on sending the
 * rest before it reads (found by an outside tester: the 400 lost to a reset).
 */
function lingerThenClose(socket: Duplex): void {
  const close = () => {
    clearTimeout(idle);
    clearTimeout(cap);
    socket.destroy();
  };
  // Unref'd: a connection being closed never keeps a stopping process waiting for its timers.
  const wait = (ms: number) => setTimeout(close, ms).unref();
  let idle = wait(lingerIdleMs);
  const cap = wait(lingerMaxMs);
  lingering.set(socket, () => {
    clearTimeout(idle);
    idle = wait(lingerIdleMs);
  });
  socket.once("end", close);
  socket.once("close", () => {
    clearTimeout(idle);
    clearTimeout(cap);
  });
  socket.on("data", () => {});
  socket.resume();
  // Node's HTTP parser reads the socket's handle itself: after `pause()` (answerClientErrors), the
  // stream's `resume()` does not start those reads again, and the client, never read, stalls.
  const handle = (socket as { _handle?: { reading?: boolean; readStart?: () => number } })._handle;
  if (handle?.readStart && handle.reading === false) {
    handle.reading = true;
    handle.readStart();
  }
}

/** Sockets whose parse failure is being answered: later failures on them change nothing. */
const answering = new WeakSet<Duplex>();

/** Responses whose request's own body the parser refused, with the status they were answered. */
const bodyRefusals = new WeakMap<ServerResponse, number>();

/**
 * The status a request was answered with because the parser refused its own body (a bad chunk, the
 * connection ending inside it), if it was. Its handler, still reading that body, then sees the
 * connection close: this says the client was answered, and has been counted, rather than gone.
 */
export function bodyRefusedWith(res: ServerResponse): number | undefined {
  return bodyRefusals.get(res);
}

/**
 * Requests Node's HTTP parser refuses (headers too large, malformed, too slow) never reach a
 * handler; Node answers them with a bare status line, and cuts whatever was still being answered on
 * the connection. This answers them the way every other refusal is answered, an OpenAI-shaped error
 * a client can show, in order: the requests read whole before the bad bytes (pipelined on the
 * connection) are answered first, then the error, then the connection closes (its bytes cannot be
 * read as a next request). A request whose own body was malformed is answered the error at once.
 */
export function answerClientErrors(server: Server, answered: (status: number) => void = () => {}): void {
  server.on("clientError", (error: ParseError, socket: Duplex) => {
    // The parser, left in its error state, refuses every later read of a refused connection again:
    // those bytes are the rest of what the client sends, read and dropped, not a new fault.
    const stillSending = lingering.get(socket);
    if (stillSending) return stillSending();
    if (error.code === H2_PREFACE_REFUSED && !currentResponse(socket) && bytesWritten(socket) === 0) {
      // The connection opened with the preface: an HTTP/2 client, answered in HTTP/2.
      socket.on("error", () => {});
      socket.end(h2Refusal());
      lingerThenClose(socket);
      answered(505);
      return;
    }
    const answer = answerFor(error);
    if (!answer || !socket.writable) {
      socket.destroy();
      return;
    }
    if (answering.has(socket)) return;
    answering.add(socket);
    // The parser is done with this connection: read nothing more from it.
    socket.pause();
    const [status, phrase, code, message] = answer;
    const respond = () => {
      const current = currentResponse(socket);
      if (current && !current.writableFinished) {
        // Read whole before the bad bytes: its answer goes first (Node then hands the socket to the
        // next one in line, if any, before this response's 'close').
        if (current.req?.complete !== false) {
          current.once("close", respond);
          return;
        }
        // The malformed bytes were this request's own body: it gets the error, or is cut if its
        // answer has begun.
        if (current.headersSent) {
          socket.destroy();
          return;
        }
      }
      if (socket.destroyed || !socket.writable) return;
      if (current && !current.writableFinished) bodyRefusals.set(current, status);
      endSocketWithError(
        socket,
        `${status} ${phrase}`,
        openAIError(message, "invalid_request_error", code),
        { "x-request-id": requestIdInRaw(error.rawPacket) },
        // A client too slow to send its request is not waited for any longer.
        status === 408 ? "close" : "linger",
      );
      answered(status);
    };
    respond();
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
  then: "close" | "linger" = "close",
): void {
  const body = escapeLineBreakers(JSON.stringify(error));
  const lines = Object.entries(headers).map(([name, value]) => `${name}: ${value}\r\n`);
  socket.on("error", () => {});
  // Closed once written, or once the client's last bytes are read (`lingerThenClose`), not only
  // half-closed: a request still waiting on this connection must see its client go, as with Node's
  // own answer.
  if (then === "linger") lingerThenClose(socket);
  else socket.once("finish", () => socket.destroy());
  socket.end(
    `HTTP/1.1 ${status}\r\n${lines.join("")}content-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\nconnection: close\r\n\r\n${body}`,
  );
}
