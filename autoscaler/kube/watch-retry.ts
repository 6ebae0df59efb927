/**
 * How long a follower waits before it opens its watch of the leader's demand again. A watch that
 * delivered something was fine until it ended (the leader moved, a restart): again soon. One that
 * did not (the leader refused it: a 401 or 403 for a token it does not take, a 503 while the Lease
 * moves) waits twice as long as the last time, up to `maxMs`. It waited `firstMs` every time: one
 * HTTP request to the leader every 0.2-0.3 s per StreamIsActive stream, 375 a second from 100
 * streams, for as long as the leader refused (found by an outside tester). Pure.
 */
export function nextWatchRetryMs(
  previousMs: number | undefined,
  delivered: boolean,
  limits: { firstMs: number; maxMs: number },
): number {
  if (delivered || previousMs === undefined) return limits.firstMs;
  return Math.min(previousMs * 2, limits.maxMs);
}
