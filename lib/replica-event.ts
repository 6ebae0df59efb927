/**
 * The vocabulary both halves share. A replica's tier moves
 * cold → starting → ready → draining → asleep-1 → asleep-2 → cold,
 * and waking leads from asleep back to ready.
 */
export type Tier = "cold" | "starting" | "ready" | "draining" | "asleep-1" | "asleep-2" | "waking";

export const tiers: readonly Tier[] = [
  "cold",
  "starting",
  "ready",
  "draining",
  "asleep-1",
  "asleep-2",
  "waking",
];

/** Capacity that is paid for and not yet routable. */
export const isWarming = (tier: Tier) => tier === "starting" || tier === "waking";
export const isAsleep = (tier: Tier) => tier === "asleep-1" || tier === "asleep-2";
/** Tiers in which a replica holds its accelerator: a slot has at most one member in one of them. */
export const residentTiers: readonly Tier[] = ["starting", "waking", "ready", "draining"];
export const isResident = (tier: Tier) => residentTiers.includes(tier);

/**
 * How long an engine's sleep call may take: a wake's time (it moves back what a sleep moves out), at
 * least 30 s. Past it the engine is stopped instead. Activators count on it too: a request held for
 * a slot member while the slot's resident goes to sleep is told how long that may still take.
 */
export const sleepTimeoutMs = (wakeTimeout: number) => Math.max(wakeTimeout, 30_000);

/** What the control plane tells every activator whenever a replica changes tier. */
export interface ReplicaEvent {
  model: string;
  replica: string;
  /** `host:port` of the engine; absent while it has none (cold). */
  address?: string;
  tier: Tier;
  /** Epoch ms when the replica entered this tier. */
  since: number;
  /** For starting and waking: how long this activation is expected to take, from measured ones. */
  estimateMs?: number;
  /** Set when an activation failed: the reason held requests are answered with. */
  error?: string;
  /**
   * With `error`: epoch ms when the model tries again (its back-off), for their Retry-After and for
   * requests that arrive meanwhile. Without `error`: the back-off ended early, at that time (a reload
   * changed the engine).
   */
  retryAt?: number;
  /** For starting and waking: W3C traceparent of the activation span, so held requests can link to it. */
  traceparent?: string;
  /** With `traceparent`: the activation's W3C tracestate (the caller's vendor entries), when it has any. */
  tracestate?: string;
  /**
   * For draining: epoch ms when its drain time (drainTimeout) is over. Requests still in flight to it
   * are ended then, each client told why, so its engine can sleep or stop.
   */
  endsAt?: number;
  /**
   * For draining: its engine stopped answering (it failed a health check) and is being replaced.
   * Its drain ends at once, and each client whose request it ends is told that, not a drain time.
   */
  unresponsive?: true;
  /**
   * Its engine is being stopped (it goes cold, not to sleep), and is gone by this epoch ms at the
   * latest: the platform's stop grace, then SIGKILL (local mode). The model can start again only
   * then, so a request refused meanwhile is told to come back then, not after a wake's time.
   */
  goneBy?: number;
  /**
   * For cold: how its engine went when it went on its own, as the platform told it (its exit code
   * or signal and last lines of output). Activators tell it to a request that engine failed under.
   */
  exit?: string;
  /**
   * News of the model, not of one replica (`replica` names no engine): what its tier is while no
   * replica of it is known (a start waiting for its pod), or a failure before any replica. It sets
   * the model's tier while no replica says otherwise, and is no replica of its own (the timeline
   * follows no placeholder's tiers, nor counts its awake time).
   */
  modelNews?: true;
}

/** Tiers from most to least awake (cold last): a model's tier is its most awake replica's. */
export const awakeOrder: readonly Tier[] = [
  "ready",
  "waking",
  "starting",
  "draining",
  "asleep-1",
  "asleep-2",
  "cold",
];

/** The most awake of some tiers; cold when there are none. */
export function mostAwake(tiers: Iterable<Tier>): Tier {
  let best: Tier = "cold";
  for (const tier of tiers) if (awakeOrder.indexOf(tier) < awakeOrder.indexOf(best)) best = tier;
  return best;
}
