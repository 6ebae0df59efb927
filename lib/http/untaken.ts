import type { ServerResponse } from "node:http";

/**
 * Calls `untaken` once the client of `res` has taken none of what waits for it on its connection
 * for `ms` (the bytes queued on the socket did not shrink); a client reading slowly, however
 * slowly, keeps it from firing. Returns what stops the watch. `ms` 0 watches nothing (`never`).
 */
export function watchUntaken(res: ServerResponse, ms: number, untaken: () => void): () => void {
  if (ms === 0) return () => {};
  const queued = () => res.socket?.writableLength ?? 0;
  let last = queued();
  let timer: NodeJS.Timeout;
  const check = () => {
    const now = queued();
    if (now < last) {
      last = now;
      timer = setTimeout(check, ms);
      return;
    }
    untaken();
  };
  timer = setTimeout(check, ms);
  return () => clearTimeout(timer);
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
