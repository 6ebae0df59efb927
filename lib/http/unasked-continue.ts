import type { Socket } from "node:net";
import type { buildConnector } from "undici";
import { undici } from "../undici.ts";

/**
 * undici's connector for `options`, every socket it makes passed through {@link dropUnaskedContinue}:
 * the connector of every dispatcher that talks to engines (the activator's pools, the autoscaler's
 * engine calls), so an engine's unasked 100 is read the same way everywhere.
 */
export function engineConnector(options: buildConnector.BuildOptions = {}): buildConnector.connector {
  const dial = undici().buildConnector(options);
  return (connectOptions, callback) =>
    dial(connectOptions, (...args) =>
      args[0] ? callback(...args) : callback(null, dropUnaskedContinue(args[1] as Socket)),
    );
}

/**
 * undici (8.13, both its llhttp and its Milo parser) never sends `Expect: 100-continue` over
 * HTTP/1.1 (an `expect` header is refused: "expect header not supported"), and so takes any
 * `100 Continue` it reads for a broken server: it destroys the connection ("bad response") before
 * the answer that follows it. RFC 9110 §15.2 says otherwise: a client must parse 1xx answers it did
 * not ask for, and may ignore them (Node's own client does: an 'information' event, then the
 * answer). An engine, or a proxy in front of one, may send a 100 to every request; the activator
 * then saw the engine fail before answering, sent the request again, and answered 502 (found by an
 * outside tester). Other 1xx answers (103 Early Hints) undici passes on as interim answers already.
 *
 * This takes such 100s out of what undici reads from a connection to an engine: at the start of an
 * answer, the heads of 1xx answers are read whole; a 100's is dropped, any other passed on; what
 * comes after the first final status line is passed on untouched (undici writes one request at a
 * time on a connection: `pipelining: 1`). A head that never ends (over `maxInterimHead`) is passed
 * on as it is, for undici to refuse.
 *
 * Between an answer's status line and the next request, undici reads the socket's own `read`, not
 * the filter, so a streamed answer's chunks cost nothing more. (A side-by-side benchmark first
 * seemed to say filtering cost 4-15% more CPU per chunk at 250 streams; the same benchmark with the
 * same code on both sides said 1.10x too: its noise, docs/benchmarks.md.)
 */
export function dropUnaskedContinue(socket: Socket): Socket {
  const read = socket.read;
  /** The next bytes begin an answer (its status line), not yet known to be a final one. */
  let atStart = true;
  /** Bytes at an answer's start, held until what they are is known. */
  let held: Buffer | undefined;
  const finalSeen = () => {
    atStart = false;
    socket.read = read;
  };
  const take = (chunk: Buffer): Buffer | undefined => {
    if (!atStart) return chunk;
    let bytes = held ? Buffer.concat([held, chunk]) : chunk;
    held = undefined;
    const out: Buffer[] = [];
    for (;;) {
      const status = interimStatus(bytes);
      if (status === "wait") {
        held = bytes;
        break;
      }
      const end = status === "final" ? -1 : bytes.indexOf("\r\n\r\n");
      if (end < 0) {
        if (status !== "final" && bytes.length <= maxInterimHead) {
          held = bytes;
          break;
        }
        finalSeen();
        out.push(bytes);
        break;
      }
      // A 1xx head, whole: a 100 goes, another (103) is passed on; the final answer is still to come.
      if (status !== 100) out.push(bytes.subarray(0, end + 4));
      bytes = bytes.subarray(end + 4);
      if (bytes.length === 0) break;
    }
    return out.length === 0 ? undefined : out.length === 1 ? out[0] : Buffer.concat(out);
  };
  // undici reads with `read()` (paused mode); `read(0)` and sized reads are the stream's own.
  const filtering = function (this: Socket, size?: number) {
    if (size !== undefined) return read.call(this, size);
    for (;;) {
      const chunk = read.call(this) as Buffer | null;
      if (chunk === null) return null;
      const passed = take(chunk);
      if (passed) return passed;
    }
  };
  const write = socket.write;
  socket.read = filtering;
  socket.write = function (this: Socket, ...args: Parameters<Socket["write"]>) {
    // A request: what the engine sends next is its answer's start.
    if (!atStart) {
      atStart = true;
      socket.read = filtering;
    }
    return write.apply(this, args);
  } as Socket["write"];
  return socket;
}

/** undici's default limit on a response's head. */
const maxInterimHead = 16 * 1024;

const versionPrefix = "HTTP/1.";

/**
 * What the bytes at an answer's start are: a 1xx status line (its code; 101 Switching Protocols
 * counts as final, as it ends HTTP/1.1 on the connection), a final one, or too few bytes to tell.
 */
function interimStatus(bytes: Buffer): number | "final" | "wait" {
  // `HTTP/1.x 1dd` then a space (or the line's end: a lax server leaves out the reason's space).
  const n = Math.min(bytes.length, 13);
  for (let i = 0; i < n; i++) {
    const c = bytes[i]!;
    const ok =
      i < 7
        ? c === versionPrefix.charCodeAt(i)
        : i === 7
          ? c === 0x30 || c === 0x31
          : i === 8
            ? c === 0x20
            : i === 9
              ? c === 0x31
              : i < 12
                ? c >= 0x30 && c <= 0x39
                : c === 0x20 || c === 0x0d;
    if (!ok) return "final";
  }
  if (n < 13) return "wait";
  const status = Number(bytes.toString("latin1", 9, 12));
  return status === 101 ? "final" : status;
}
