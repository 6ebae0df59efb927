import { isWarming, type ReplicaEvent, type Tier } from "../lib/replica-event.ts";

/**
 * Which tier changes become CloudEvents (types under `dev.snooze.`), so a
 * Knative Broker or any sink can react to a model waking, sleeping or failing.
 */
export function cloudEventFor(
  from: Tier,
  event: ReplicaEvent,
): { type: string; data: Record<string, unknown> } | undefined {
  const data = { model: event.model, replica: event.replica, from, to: event.tier, address: event.address };
  if (event.error) return { type: "dev.snooze.activation.failed", data: { ...data, reason: event.error } };
  if (from === event.tier) return undefined;
  if (event.tier === "ready" && from === "starting") return { type: "dev.snooze.replica.started", data };
  if (event.tier === "ready" && from === "waking") return { type: "dev.snooze.replica.woke", data };
  if (event.tier === "asleep-1" || event.tier === "asleep-2") {
    return { type: "dev.snooze.replica.slept", data: { ...data, level: event.tier === "asleep-1" ? 1 : 2 } };
  }
  if (event.tier === "cold") return { type: "dev.snooze.replica.stopped", data };
  return undefined;
}

/** A CloudEvent to send for a replica event: its type, subject (the model), data and trace context. */
export interface TierCloudEvent {
  type: string;
  subject: string;
  data: Record<string, unknown>;
  /** The activation's W3C traceparent, for the distributed-tracing extension. */
  traceparent?: string;
  /** Its W3C tracestate (the caller's vendor entries), which the extension carries with it. */
  tracestate?: string;
}

/**
 * Something that happened to a model or a slot, once: what goes out as a CloudEvent and, on
 * Kubernetes, as an Event on each Model it is about (`models`: their controller keys).
 */
export interface News extends TierCloudEvent {
  models: string[];
}

/** A slot changed hands: the incumbent `from` slept, the target `to` is ready. */
export interface SlotSwap {
  slot: string;
  /** Model ids. */
  from: string;
  to: string;
  /** Why the arbiter swapped (the policy's words). */
  reason: string;
  /** From the decision until the target was ready. */
  durationMs: number;
  /** The `snooze.swap` span's W3C traceparent. */
  traceparent?: string;
  /** And its tracestate, when it has entries. */
  tracestate?: string;
}

/** The `dev.snooze.slot.swapped` CloudEvent of a swap; its subject is the slot. */
export function swapCloudEvent(swap: SlotSwap): TierCloudEvent {
  const { traceparent, tracestate, ...data } = swap;
  return {
    type: "dev.snooze.slot.swapped",
    subject: swap.slot,
    data,
    ...(traceparent ? { traceparent, ...(tracestate ? { tracestate } : {}) } : {}),
  };
}

/**
 * Turns the stream of replica events into CloudEvents: remembers each replica's last tier (so
 * `from` is known) and the trace context (traceparent, tracestate) of its activation, which only the `starting` and `waking`
 * events carry, so the `started`, `woke` and `activation.failed` events that end that activation
 * carry it too.
 */
export class TierEvents {
  private readonly last = new Map<
    string,
    { tier: Tier; since: number; traceparent?: string; tracestate?: string }
  >();
  private readonly now: () => number;

  /** `now` dates a failure that leaves the replica where it was (a start that failed while starting). */
  constructor(now: () => number = Date.now) {
    this.now = now;
  }

  next(event: ReplicaEvent): TierCloudEvent | undefined {
    const key = `${event.model}\u0000${event.replica}`;
    const before = this.last.get(key);
    const from = before?.tier ?? "cold";
    const activating = isWarming(event.tier);
    // The activation's trace context, the traceparent with its tracestate (never one without the other's).
    const remembered = isWarming(from) || activating ? before : undefined;
    const { traceparent, tracestate } = event.traceparent
      ? event
      : { traceparent: remembered?.traceparent, tracestate: remembered?.tracestate };
    if (event.tier === "cold") this.last.delete(key);
    else
      this.last.set(key, {
        tier: event.tier,
        // The same tier told again (a swap's announcement) did not start anew.
        since: before?.tier === event.tier ? before.since : event.since,
        traceparent: activating ? traceparent : undefined,
        tracestate: activating ? tracestate : undefined,
      });
    const news = cloudEventFor(from, event);
    if (!news) return undefined;
    // How long the replica was `from`: the start, the wake, the drain and sleep, the time asleep; for
    // a failure that left it there (its tier unchanged), until now.
    const until = event.error !== undefined && event.tier === from ? this.now() : event.since;
    const durationMs = before && until >= before.since ? until - before.since : undefined;
    return {
      ...news,
      data: { ...news.data, ...(durationMs !== undefined ? { durationMs } : {}) },
      subject: event.model,
      ...(traceparent ? { traceparent, ...(tracestate ? { tracestate } : {}) } : {}),
    };
  }
}
