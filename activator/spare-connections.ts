import type { Socket } from "node:net";
import type { buildConnector as BuildConnector } from "undici";
import { engineConnector } from "../lib/http/unasked-continue.ts";

type Connector = BuildConnector.connector;

interface Spare {
  socket: Socket;
  openedAt: number;
  drop(): void;
  readable(): void;
}

/**
 * Connections to one engine opened before any request needs them, handed to its pool first.
 *
 * While an engine wakes, the requests held for it are known and it serves nothing else, so the
 * activator connects then (`fill`). When it is ready, the first released requests are written on
 * connections the engine accepted long before, instead of each waiting for a handshake and for the
 * engine's accept (in a Node.js engine such as the simulator, one connection per turn of its event
 * loop while the release keeps it busy). A spare the engine closed meanwhile is dropped, and so is one
 * older than `maxAgeMs`: a server may close a connection that never sent a request (Node's
 * `headersTimeout`, 60 s), and a request written as it does would fail.
 */
export class SpareConnections {
  /** The pool's `connect` option: a spare if one is left, else a new connection. */
  readonly connect: Connector;
  private readonly dial: Connector;
  private readonly target: BuildConnector.Options;
  private readonly maxAgeMs: number;
  private readonly now: () => number;
  private readonly spares: Spare[] = [];
  private opening = 0;
  /** The pool's connects that wait for a spare still opening (one per spare at most). */
  private readonly waiting: { options: BuildConnector.Options; callback: BuildConnector.Callback }[] = [];
  /** Spares that arrive are kept (between `fill` and `release`). */
  private wanted = false;
  private closed = false;

  constructor(origin: URL, options: { connectTimeout?: number; maxAgeMs?: number; now?: () => number } = {}) {
    // Every connection to the engine, spare or not: a `100 Continue` it sends unasked is dropped
    // before undici reads it (it would take it for a broken server and cut the request).
    this.dial = engineConnector(
      options.connectTimeout !== undefined ? { timeout: options.connectTimeout } : {},
    );
    this.target = {
      hostname: origin.hostname,
      host: origin.host,
      protocol: origin.protocol,
      port: origin.port,
    };
    this.maxAgeMs = options.maxAgeMs ?? 30_000;
    this.now = options.now ?? Date.now;
    this.connect = (connectOptions, callback) => {
      const socket = this.take();
      // Called back on a microtask, as a real connect would: undici's connect() expects it later.
      if (socket) queueMicrotask(() => callback(null, socket));
      // A spare on its way is as soon as a new connection, and adds none to the engine's accepts.
      else if (this.opening > this.waiting.length) this.waiting.push({ options: connectOptions, callback });
      // Returned, as the built-in connector does, so undici can abandon an attempt it no longer needs.
      else return this.dial(connectOptions, callback);
    };
  }

  /** Spares open or being opened. */
  get count(): number {
    return this.spares.length + this.opening;
  }

  /** Opens connections until `wanted` are open or opening; a connection that fails is not retried. */
  fill(wanted: number): void {
    if (this.closed) return;
    this.wanted = true;
    while (this.count < wanted) this.open();
  }

  /**
   * Closes the spares left, and those still on their way once they arrive (unless the pool waits for
   * them); the pool dials for itself from now on, until the next `fill`.
   */
  release(): void {
    this.wanted = false;
    for (const spare of this.spares.splice(0)) spare.drop();
  }

  /** Closes the spares and every one still opening; `fill` does nothing any more. */
  close(): void {
    this.closed = true;
    this.release();
  }

  private open(): void {
    this.opening++;
    this.dial(this.target, (_error, socket) => {
      this.opening--;
      const waiter = this.waiting.shift();
      if (waiter) {
        // The pool asked while this one was on its way: it gets it, or dials itself if it failed.
        if (socket) waiter.callback(null, socket);
        else this.dial(waiter.options, waiter.callback);
      } else if (socket) {
        if (this.wanted) this.keep(socket);
        else socket.destroy();
      }
    });
  }

  private keep(socket: Socket): void {
    const spare = {
      socket,
      openedAt: this.now(),
      drop: () => {
        this.forget(spare);
        socket.destroy();
      },
      // Reading is what makes a paused socket tell of its end; a byte the engine sends unasked
      // makes it useless as well.
      readable: () => {
        if (socket.read() !== null) spare.drop();
      },
    };
    socket.on("readable", spare.readable).once("end", spare.drop).once("close", spare.drop);
    this.spares.push(spare);
  }

  private take(): Socket | undefined {
    const now = this.now();
    for (let spare = this.spares.shift(); spare; spare = this.spares.shift()) {
      if (spare.socket.destroyed || now - spare.openedAt > this.maxAgeMs) {
        spare.drop();
        continue;
      }
      spare.socket.off("readable", spare.readable).off("end", spare.drop).off("close", spare.drop);
      return spare.socket;
    }
    return undefined;
  }

  private forget(spare: Spare): void {
    const at = this.spares.indexOf(spare);
    if (at >= 0) this.spares.splice(at, 1);
  }
}
