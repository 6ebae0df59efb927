/**
 * How many StreamIsActive streams one autoscaler replica holds open at once. KEDA's operator opens
 * one per `external-push` trigger and keeps it open (it shares one connection among all the
 * ScaledObjects that name the same scaler address and TLS settings), so a cluster needs as many as
 * it has such triggers, and for a minute after the operator is replaced up to twice that (the old
 * pod's streams last until the keepalive finds them gone). Each stream costs a watch with its tick:
 * 2,000 idle ones took about 2.6% of the event loop (measured once by hand, when each also held a
 * repush timer), and nothing bounded them.
 */
export interface StreamLimits {
  /** Streams open on this replica, from everyone. */
  total: number;
  /**
   * Streams open from one client address: below `total`, so one client (a stray or hostile pod)
   * that fills its share leaves the rest to KEDA's operator.
   */
  perPeer: number;
}

/** Twice a cluster of 1,024 Models each with an `external-push` trigger: a real KEDA stays far below. */
export const defaultStreamLimits: StreamLimits = { total: 4_096, perPeer: 2_048 };

/**
 * The client address of grpc-js's `call.getPeer()` (`10.0.0.7:51234`, `::1:51234`, `unknown`):
 * every connection of one pod comes from it, whatever its port.
 */
export function peerHost(peer: string): string {
  const port = /:\d+$/.exec(peer);
  return port ? peer.slice(0, port.index) : peer;
}

/**
 * Why one more stream from `peer` may not open, given the streams open now; undefined when it may.
 * The message is the RESOURCE_EXHAUSTED status KEDA logs, so it names the limit that was hit.
 */
export function streamRefusal(
  open: { total: number; fromPeer: number },
  peer: string,
  limits: StreamLimits,
): string | undefined {
  if (open.fromPeer >= limits.perPeer)
    return `${peer} has ${open.fromPeer} StreamIsActive streams open, the limit per client address (KEDA opens one per external-push trigger); retry after closing some`;
  if (open.total >= limits.total)
    return `this autoscaler replica has ${open.total} StreamIsActive streams open, its limit (KEDA opens one per external-push trigger); retry later`;
  return undefined;
}

/** The streams open now, by client address; `open` takes one or says why not. */
export class StreamCap {
  private readonly limits: StreamLimits;
  private readonly byPeer = new Map<string, number>();
  private total = 0;

  constructor(limits: StreamLimits) {
    this.limits = limits;
  }

  get size(): number {
    return this.total;
  }

  /** Takes a stream for `peer` (an address: peerHost); returns its release (once), or the refusal. */
  open(peer: string): { release: () => void } | { refusal: string } {
    const fromPeer = this.byPeer.get(peer) ?? 0;
    const refusal = streamRefusal({ total: this.total, fromPeer }, peer, this.limits);
    if (refusal) return { refusal };
    this.total++;
    this.byPeer.set(peer, fromPeer + 1);
    let released = false;
    return {
      release: () => {
        if (released) return;
        released = true;
        this.total--;
        const left = (this.byPeer.get(peer) ?? 1) - 1;
        // Gone when zero: a map of every address that ever connected would grow for good.
        if (left > 0) this.byPeer.set(peer, left);
        else this.byPeer.delete(peer);
      },
    };
  }
}
