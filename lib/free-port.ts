import { readFileSync } from "node:fs";
import { connect, createServer } from "node:net";
import { localResourceCodes } from "./http/local-resources.ts";

/**
 * Where free ports are looked for: below the kernel's ephemeral range, because a port picked from
 * inside it can be taken by any outgoing connection between the pick and the bind (found by a
 * benchmark whose engine lost its port to a parallel test's client). Linux says its range in
 * /proc; elsewhere (and on a Linux whose range starts too low to leave room) the OS picks.
 */
function searchWindow(): { from: number; to: number } | undefined {
  let low = 32_768;
  try {
    low = Number(readFileSync("/proc/sys/net/ipv4/ip_local_port_range", "utf8").trim().split(/\s+/)[0]);
  } catch {
    // Not Linux: 32768 is below the BSDs' and macOS's range (49152) too.
  }
  const from = Math.max(10_000, low - 12_000);
  return Number.isFinite(low) && low - from >= 1_000 ? { from, to: low } : undefined;
}

let window: { from: number; to: number } | undefined | null = null;

/**
 * Listens on `host:port` alone: undefined when the port cannot be had (taken, or not allowed), and
 * an error when this process could not try (out of descriptors: `EMFILE`), which says nothing of
 * the port. Taken for a busy port, every port tried failed the same way and the search said `no
 * free ports`, a start failing for a reason it did not name (found by an outside tester).
 */
function listenOn(port: number, host: string): Promise<{ port: number; close(): Promise<void> } | undefined> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once("error", (error: NodeJS.ErrnoException) => {
      const code = error.code;
      if (code === undefined || !localResourceCodes.has(code) || code === "EADDRNOTAVAIL") resolve(undefined);
      else {
        const out =
          code === "EMFILE" || code === "ENFILE" ? "out of file descriptors" : "out of memory or buffers";
        reject(
          Object.assign(new Error(`no port could be tried: ${out} (${code})`, { cause: error }), { code }),
        );
      }
    });
    server.listen({ port, host, exclusive: true }, () => {
      const bound = (server.address() as { port: number }).port;
      resolve({ port: bound, close: () => new Promise<void>((done) => server.close(() => done())) });
    });
  });
}

/**
 * `count` consecutive ports on `host` nothing listens on right now, the first returned. Another
 * process may still take one before the caller binds it; looking outside the ephemeral range
 * makes that rare rather than a matter of load. None is in `avoid`: ports kept for someone who
 * is not listening yet (a model's fixed `port` while it is cold).
 */
export async function freePortRange(
  count: number,
  host = "127.0.0.1",
  avoid: ReadonlySet<number> = new Set(),
): Promise<number> {
  if (window === null) window = searchWindow();
  const span = window;
  if (span === undefined && count === 1) {
    for (let attempt = 0; attempt < 50; attempt++) {
      const picked = await listenOn(0, host);
      if (!picked) throw new Error(`no free port on ${host}`);
      await picked.close();
      if (!avoid.has(picked.port)) return picked.port;
    }
    throw new Error(`no free port on ${host} outside those kept for fixed ports`);
  }
  const { from, to } = span ?? { from: 20_000, to: 30_000 };
  for (let attempt = 0; attempt < 50; attempt++) {
    const base = from + Math.floor(Math.random() * (to - from - count + 1));
    if (Array.from({ length: count }, (_, i) => base + i).some((port) => avoid.has(port))) continue;
    const held: { close(): Promise<void> }[] = [];
    try {
      for (let i = 0; i < count; i++) {
        const server = await listenOn(base + i, host);
        if (!server) break;
        held.push(server);
      }
      if (held.length === count) return base;
    } finally {
      await Promise.all(held.map((server) => server.close()));
    }
  }
  throw new Error(`no ${count} consecutive free ports on ${host} in ${from}–${to}`);
}

/** A port on `host` nothing listens on right now, and not in `avoid` (see freePortRange). */
export function freePort(host = "127.0.0.1", avoid?: ReadonlySet<number>): Promise<number> {
  return freePortRange(1, host, avoid);
}

/** Whether something accepts connections on `host:port` now (a connection is opened and closed). */
export function portInUse(port: number, host = "127.0.0.1", timeoutMs = 1_000): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host, timeout: timeoutMs });
    const done = (inUse: boolean) => {
      socket.destroy();
      resolve(inUse);
    };
    socket.once("connect", () => done(true));
    socket.once("error", () => done(false));
    socket.once("timeout", () => done(false));
  });
}
