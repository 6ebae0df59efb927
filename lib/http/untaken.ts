import { readFile, readlink } from "node:fs/promises";
import type { ServerResponse } from "node:http";
import type { Socket } from "node:net";
import { parseTcpRow, socketInode } from "../proc-net-tcp.ts";

/**
 * Calls `untaken` once the client of `res` has taken none of what waits for it on its connection
 * for `ms`: the bytes queued on the socket in Node did not shrink, nor did those the kernel holds
 * for it (sent and not yet acknowledged, or not sent yet), where the kernel says (Linux). Node
 * hands the kernel a batch of chunks at a time and counts the batch queued until the kernel took
 * all of it, and loopback's socket buffers hold megabytes: a client reading a few hundred KiB a
 * second empties the kernel's share while what waits in Node stays put for seconds (found by an
 * outside tester: such a client was cut at an idleTimeout of 3 s, counted as gone). Its kernel
 * share is asked halfway through `ms` and at its end, so only a client backlogged that long costs
 * the two reads. Returns what stops the watch. `ms` 0 watches nothing (`never`).
 */
export function watchUntaken(res: ServerResponse, ms: number, untaken: () => void): () => void {
  if (ms === 0) return () => {};
  const socket = res.socket;
  const queued = () => socket?.writableLength ?? 0;
  let last = queued();
  // The kernel's share halfway through this wait, and at the end of the last one (when it showed
  // progress): acknowledgements come in bursts, so the longer look catches what the shorter misses.
  let halfway: Promise<number | undefined> | undefined;
  let previous: number | undefined;
  let stopped = false;
  let timer: NodeJS.Timeout;
  const arm = () => {
    halfway = undefined;
    timer = setTimeout(
      () => {
        if (socket) halfway = kernelSendQueue(socket);
        timer = setTimeout(check, ms - Math.floor(ms / 2));
      },
      Math.floor(ms / 2),
    );
  };
  const check = async () => {
    const now = queued();
    if (now < last) {
      last = now;
      previous = undefined;
      arm();
      return;
    }
    const before = await halfway;
    const after = before === undefined || !socket ? undefined : await kernelSendQueue(socket);
    if (stopped) return;
    if (after !== undefined && after < Math.max(before ?? 0, previous ?? 0)) {
      last = queued();
      previous = after;
      arm();
      return;
    }
    untaken();
  };
  arm();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}

/**
 * The bytes the kernel holds for `socket`'s peer: written to it and not acknowledged yet (Linux's
 * `tx_queue` in /proc/net/tcp, found by the socket's inode). Undefined where that cannot be read
 * (another system, a socket closed meanwhile).
 */
export async function kernelSendQueue(socket: Socket): Promise<number | undefined> {
  const fd = (socket as unknown as { _handle?: { fd?: unknown } })._handle?.fd;
  if (typeof fd !== "number" || fd < 0) return undefined;
  try {
    const inode = socketInode(await readlink(`/proc/self/fd/${fd}`));
    if (inode === undefined) return undefined;
    const tables = socket.remoteFamily === "IPv6" ? ["tcp6", "tcp"] : ["tcp", "tcp6"];
    for (const table of tables) {
      // Looked for rather than every line parsed: the table has a line for every socket.
      const text = await readFile(`/proc/net/${table}`, "latin1");
      for (let at = text.indexOf(` ${inode} `); at >= 0; at = text.indexOf(` ${inode} `, at + 1)) {
        const end = text.indexOf("\n", at);
        const row = parseTcpRow(text.slice(text.lastIndexOf("\n", at) + 1, end < 0 ? undefined : end));
        if (row?.inode === inode) return row.txQueue;
      }
    }
  } catch {
    // No /proc (another system), or the socket went: nothing to say.
  }
  return undefined;
}

/**
 * An answer ended (`res.end`) while its client takes none of it: its last bytes wait on the
 * connection until the client reads them, and nothing else in Node times out an answer being
 * written (the keep-alive timeout starts once they are out), so a client that stopped reading and
 * kept its connection open kept the connection, and the bytes, for ever. Closed once the client
 * takes none of them for `ms`; nothing is watched when they are out already.
 */
export function closeUntakenTail(res: ServerResponse, ms: number): void {
  if (!res.writableEnded || res.writableFinished || res.destroyed) return;
  // Every byte handed to the kernel already (the usual case, a small answer written at once): its
  // 'finish' comes on its own, and no timer nor listener is set up on the request's hot path.
  if ((res.socket?.writableLength ?? 0) === 0) return;
  const stop = watchUntaken(res, ms, () => res.destroy());
  const done = () => {
    stop();
    res.off("finish", done);
    res.off("close", done);
  };
  res.on("finish", done);
  res.on("close", done);
}
