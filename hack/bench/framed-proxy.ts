/**
 * A Node.js proxy with HTTP/1.1's framing written by hand on raw sockets, as a yardstick: how far
 * a Node data plane off node:http and undici could go on this machine. Per request it does what
 * the activator cannot skip (finds the head, reads the body whole and parses it as JSON, as
 * routing must to find the model) and no more: the request goes on to a pooled keep-alive
 * connection to the engine as the client wrote it, and the engine's answer comes back as it wrote
 * it, framed by its Content-Length. It is no HTTP implementation (no chunked bodies, no header
 * checks, no errors answered): a correct one costs more. Between `node-relay` (no HTTP at all)
 * and `node-minimal` (node:http + undici) it tells what of the minimal proxy's cost is Node's HTTP
 * modules rather than HTTP itself.
 *
 *   node hack/bench/framed-proxy.ts --port 8080 --upstream 127.0.0.1:8000
 */
import { connect, createServer, type Socket } from "node:net";
import { parseArgs } from "node:util";

const { values } = parseArgs({ options: { port: { type: "string" }, upstream: { type: "string" } } });
const [engineHost, enginePort] = (values.upstream ?? "").split(":");
const idle: EngineConnection[] = [];
const headEnd = Buffer.from("\r\n\r\n");

/** The Content-Length of a head (the text before its blank line); 0 without one. */
function contentLength(head: string): number {
  const found = /\r\ncontent-length:[ \t]*(\d+)/i.exec(head);
  return found ? Number(found[1]) : 0;
}

/** Bytes read and not yet used, kept across reads. */
function joined(kept: Buffer | undefined, read: Buffer): Buffer {
  return kept ? Buffer.concat([kept, read]) : read;
}

class EngineConnection {
  readonly socket = connect(Number(enginePort), engineHost);
  private kept: Buffer | undefined;
  /** Bytes of the answer's body still to come; -1 while its head is read. */
  private bodyLeft = -1;
  client: ClientConnection | undefined;

  constructor() {
    this.socket.setNoDelay(true);
    this.socket.on("data", (read) => this.answer(read));
    this.socket.on("error", () => {});
    this.socket.on("close", () => {
      const at = idle.indexOf(this);
      if (at >= 0) idle.splice(at, 1);
      this.client?.socket.destroy();
    });
  }

  private answer(read: Buffer): void {
    const client = this.client;
    if (!client) return;
    if (this.bodyLeft < 0) {
      const data = joined(this.kept, read);
      const end = data.indexOf(headEnd);
      if (end < 0) {
        this.kept = data;
        return;
      }
      this.kept = undefined;
      this.bodyLeft = contentLength(data.toString("latin1", 0, end)) - (data.length - end - 4);
      client.socket.write(data);
    } else {
      this.bodyLeft -= read.length;
      client.socket.write(read);
    }
    if (this.bodyLeft > 0) return;
    this.bodyLeft = -1;
    this.client = undefined;
    idle.push(this);
    client.next();
  }
}

class ClientConnection {
  private kept: Buffer | undefined;
  private waiting = false;

  readonly socket: Socket;

  constructor(socket: Socket) {
    this.socket = socket;
    socket.setNoDelay(true);
    socket.on("data", (read) => {
      this.kept = joined(this.kept, read);
      if (!this.waiting) this.next();
    });
    socket.on("error", () => {});
  }

  /** Sends the next whole request on, if one is in. */
  next(): void {
    this.waiting = false;
    const data = this.kept;
    if (!data) return;
    const end = data.indexOf(headEnd);
    if (end < 0) return;
    const length = end + 4 + contentLength(data.toString("latin1", 0, end));
    if (data.length < length) return;
    try {
      JSON.parse(data.toString("utf8", end + 4, length));
    } catch {
      this.socket.destroy();
      return;
    }
    this.kept = data.length > length ? data.subarray(length) : undefined;
    this.waiting = true;
    const engine = idle.pop() ?? new EngineConnection();
    engine.client = this;
    engine.socket.write(data.subarray(0, length));
  }
}

createServer((socket) => new ClientConnection(socket)).listen(Number(values.port), "127.0.0.1");
process.on("SIGTERM", () => process.exit(0));
