import { isAsleep, isResident, type ReplicaEvent, type Tier } from "../lib/replica-event.ts";
import type { SlotStatus } from "../lib/slot-status.ts";
import type { GpuUsage } from "./admin.ts";

/** What happened to a model, as the status page's timeline lists it. */
export type TimelineKind = "start" | "wake" | "sleep" | "deepen" | "stop" | "swap" | "failure";

export interface TimelineEntry {
  /** Increases by one per entry: a client that reconnects skips what it has. */
  seq: number;
  model: string;
  replica?: string;
  kind: TimelineKind;
  /** When it ended (or happened), ISO. */
  at: string;
  /** When it began, when known (a start's cold moment, a sleep's drain). */
  startedAt?: string;
  durationMs?: number;
  /** The tiers it went between (a failed wake goes back to where it came from). */
  from?: Tier;
  to?: Tier;
  /** A swap: the model that gave up the slot. */
  swappedOut?: string;
  slot?: string;
  /** A failure's reason. */
  message?: string;
}

/** A stretch of time a model spent in one tier (its most awake replica's). */
export interface TierSegment {
  tier: Tier;
  /** Epoch ms. */
  from: number;
  /** Epoch ms; absent for the current one. */
  to?: number;
}

/**
 * What the live stream carries: every replica event as it arrives, each finished entry, and word
 * that the model list (`GET /snooze/v1/models`) changed otherwise: a model added or removed, a
 * reload of the settings refused or a refused one made good.
 */
export type TimelineMessage =
  | { type: "tier"; event: ReplicaEvent }
  | { type: "entry"; entry: TimelineEntry }
  | { type: "models" };

export interface TimelineOptions {
  /** The slot a model belongs to, if any: a slot member's ready replica may end a swap. */
  slotOf?(model: string): string | undefined;
  /** The slots' statuses (the admin API's), read once a slot member becomes ready to see its swap. */
  slots?(): Promise<SlotStatus[]>;
  /** When a model was added (a reload), if after the timeline's start: its usage counts from then. */
  addedAt?(model: string): number | undefined;
  /**
   * Whether a model is served (listed) now. A model that is not, once no replica of it is left, has
   * its tier history and GPU time dropped; without this they are kept for every model ever seen.
   */
  listed?(model: string): boolean;
  now?(): number;
  /** How far back entries and segments are kept (default one hour). */
  windowMs?: number;
  /** At most this many entries are kept, newest last. */
  maxEntries?: number;
}

interface ReplicaState {
  tier: Tier;
  since: number;
  /** The start or wake under way, and when it began. */
  activation?: { kind: "start" | "wake"; since: number; from: Tier };
  /** When it fell asleep (at either level): the zero clock counts from here. */
  asleepSince?: number;
  /** When the last drain began (a sleep or stop's start). */
  drainSince?: number;
  /** When the replica started holding its accelerator, while it does (clamped to the timeline's start). */
  awakeFrom?: number;
}

interface ModelLedger {
  awakeMs: number;
  peak: number;
  segments: TierSegment[];
  /** When the model was added, as `addedAt` said when this ledger began counting. */
  addedAt?: number;
}

const order: Tier[] = ["ready", "waking", "starting", "draining", "asleep-1", "asleep-2", "cold"];
const maxSegments = 500;

/**
 * The activator's record of what the control plane did, from the replica events every activator
 * receives (so it is the same in local mode and on Kubernetes): the last hour of cold starts, wakes,
 * sleeps, stops, swaps and failures with their durations; each model's tier over that hour; and
 * how long each model held an accelerator against keeping it always on. Subscribers (the status
 * page's event stream) hear each event and entry as it happens.
 */
export class Timeline {
  readonly startedAt: number;
  private readonly options: TimelineOptions;
  private readonly now: () => number;
  private readonly windowMs: number;
  private readonly maxEntries: number;
  private readonly replicas = new Map<string, ReplicaState>();
  private readonly ledgers = new Map<string, ModelLedger>();
  private readonly list: TimelineEntry[] = [];
  private readonly listeners = new Set<(message: TimelineMessage) => void>();
  private readonly swapsSeen = new Map<string, string>();
  private slotCheck?: NodeJS.Timeout;
  private seq = 0;

  constructor(options: TimelineOptions = {}) {
    this.options = options;
    this.now = options.now ?? Date.now;
    this.windowMs = options.windowMs ?? 3_600_000;
    this.maxEntries = options.maxEntries ?? 1_000;
    this.startedAt = this.now();
  }

  /**
   * Hears every message from now on; returns unsubscribe. How many may listen is the event
   * stream's to bound (activator/stream-slots.ts), each listener being a client's stream.
   */
  subscribe(listener: (message: TimelineMessage) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Entries of the last hour, oldest first. */
  entries(): TimelineEntry[] {
    this.prune();
    return [...this.list];
  }

  /** Each model's tiers over the last hour, oldest first (the last one is current). */
  segments(model: string): TierSegment[] {
    const ledger = this.ledgers.get(model);
    if (!ledger) return [{ tier: "cold", from: this.startedAt }];
    const cutoff = this.now() - this.windowMs;
    return ledger.segments.filter((s) => (s.to ?? Number.POSITIVE_INFINITY) >= cutoff);
  }

  /**
   * Accelerator seconds of `model` since the start (or since it was added), and what sleeping saved
   * against always-on over that time.
   */
  usage(model: string): GpuUsage {
    const now = this.now();
    const since = Math.max(this.startedAt, this.options.addedAt?.(model) ?? this.startedAt);
    const ledger = this.ledgers.has(model) ? this.ledger(model) : undefined;
    let awakeMs = ledger?.awakeMs ?? 0;
    for (const [key, state] of this.replicas)
      if (key.startsWith(`${model}\u0000`) && state.awakeFrom !== undefined)
        awakeMs += Math.max(0, now - state.awakeFrom);
    const elapsedMs = Math.max(0, now - since);
    const baselineReplicas = Math.max(1, ledger?.peak ?? 0);
    const seconds = (ms: number) => Math.round(ms / 100) / 10;
    return {
      awakeSeconds: seconds(awakeMs),
      elapsedSeconds: seconds(elapsedMs),
      savedSeconds: seconds(Math.max(0, elapsedMs * baselineReplicas - awakeMs)),
      baselineReplicas,
    };
  }

  /** The replica's tier and when it entered it, and when it fell asleep, as far as events told. */
  replica(model: string, replica: string): { tier: Tier; since: number; asleepSince?: number } | undefined {
    const state = this.replicas.get(`${model}\u0000${replica}`);
    return state ? { tier: state.tier, since: state.since, asleepSince: state.asleepSince } : undefined;
  }

  /** A replica event from the control plane (the first ones describe replicas that already exist). */
  observe(event: ReplicaEvent): void {
    this.publish({ type: "tier", event });
    const key = `${event.model}\u0000${event.replica}`;
    const before = this.replicas.get(key);
    const now = this.now();
    // An event's own time, but never before what we already know nor in the future.
    const at = Math.min(now, Math.max(event.since, before?.since ?? Number.NEGATIVE_INFINITY));

    if (event.error !== undefined) {
      const activation = before?.activation;
      // A failure in place (a start that failed while starting) keeps its tier and its `since`: it
      // happened now, not when that tier began.
      const failedAt = before && event.tier === before.tier ? now : at;
      this.add({
        model: event.model,
        ...(before ? { replica: event.replica } : {}),
        kind: "failure",
        at: iso(failedAt),
        ...(activation
          ? { startedAt: iso(activation.since), durationMs: Math.max(0, failedAt - activation.since) }
          : {}),
        ...(activation ? { from: activation.from } : {}),
        to: event.tier,
        message: event.error,
      });
      if (before) before.activation = undefined;
    }
    if (event.modelNews) return;
    if (!before) {
      // A placeholder (an announcement of a swap, an activation that failed before any replica)
      // or a replica gone before we knew it: nothing to follow.
      if (event.tier === "cold") return;
      const state: ReplicaState = { tier: event.tier, since: event.since };
      if (event.tier === "starting") state.activation = { kind: "start", since: event.since, from: "cold" };
      if (event.tier === "waking") state.activation = { kind: "wake", since: event.since, from: "asleep-1" };
      if (event.tier === "draining") state.drainSince = event.since;
      if (isAsleep(event.tier)) state.asleepSince = event.since;
      if (isResident(event.tier)) state.awakeFrom = Math.max(event.since, this.startedAt);
      this.replicas.set(key, state);
      this.modelChanged(event.model, at);
      return;
    }
    if (before.tier === event.tier) return;
    const from = before.tier;
    const to = event.tier;
    const entry = (kind: TimelineKind, startedAt: number | undefined, extra: Partial<TimelineEntry> = {}) =>
      this.add({
        model: event.model,
        replica: event.replica,
        kind,
        at: iso(at),
        ...(startedAt !== undefined
          ? { startedAt: iso(startedAt), durationMs: Math.max(0, at - startedAt) }
          : {}),
        from,
        to,
        ...extra,
      });

    if (to === "starting") before.activation = { kind: "start", since: at, from };
    // A start stays a start through `waking` (on Kubernetes: recorded ready, the pod not Ready yet).
    else if (to === "waking") before.activation ??= { kind: "wake", since: at, from };
    else if (to === "ready") {
      // From where it began: cold for a start, the sleep level for a wake.
      if (before.activation)
        entry(before.activation.kind, before.activation.since, { from: before.activation.from });
      before.activation = undefined;
      if (this.options.slotOf?.(event.model) !== undefined) this.checkSlots();
    } else if (to === "draining") before.drainSince = at;
    else if (to === "asleep-1" || to === "asleep-2") {
      if (from === "draining") entry("sleep", before.drainSince);
      else if (from === "asleep-1") entry("deepen", undefined);
      // A watch may skip the drain (two annotation changes in one update): a sleep all the same.
      else if (from === "ready") entry("sleep", undefined);
      // From waking or starting: the failed activation was told by its error.
      before.activation = undefined;
    } else if (to === "cold") {
      if (from === "draining") entry("stop", before.drainSince);
      // An activation that failed was told by its error (above): one that goes cold without one was
      // stopped on purpose (a person's stop during a start, a reload, Snooze's shutdown).
      else if (before.activation) entry("stop", before.activation.since);
      else if (from !== "starting" && from !== "waking") entry("stop", undefined);
    }

    if (isResident(to) && before.awakeFrom === undefined) before.awakeFrom = at;
    if (!isResident(to) && before.awakeFrom !== undefined) {
      this.ledger(event.model).awakeMs += Math.max(0, at - before.awakeFrom);
      before.awakeFrom = undefined;
    }
    if (isAsleep(to) && !isAsleep(from)) before.asleepSince = at;
    before.tier = to;
    before.since = at;
    if (to === "cold") this.replicas.delete(key);
    this.modelChanged(event.model, at);
    // A removed model's engine stops after the model left the list (it served what it held first).
    if (to === "cold") this.forgetIfGone(event.model);
  }

  /** Swaps the slots report that this timeline has not listed yet. */
  noteSlots(statuses: SlotStatus[]): void {
    // Slots a reload took away: their last swap is no longer reported (the statuses are all slots).
    const named = new Set(statuses.map((slot) => slot.name));
    for (const name of this.swapsSeen.keys()) if (!named.has(name)) this.swapsSeen.delete(name);
    for (const slot of statuses) {
      const swap = slot.lastSwap;
      if (!swap) continue;
      const signature = `${swap.at}|${swap.from}|${swap.to}`;
      if (this.swapsSeen.get(slot.name) === signature) continue;
      this.swapsSeen.set(slot.name, signature);
      const at = Date.parse(swap.at);
      if (at < this.startedAt) continue;
      this.add({
        model: swap.to,
        kind: "swap",
        at: swap.at,
        startedAt: iso(at - swap.durationMs),
        durationMs: swap.durationMs,
        swappedOut: swap.from,
        slot: slot.name,
      });
    }
  }

  /** The model list changed other than by a replica event (a model added or removed, a reload refused). */
  modelsChanged(): void {
    for (const model of this.ledgers.keys()) this.forgetIfGone(model);
    this.publish({ type: "models" });
  }

  /**
   * A model no longer listed with no replica left: its ledger goes (found by a probe: a Snooze whose
   * reloads added and removed models kept a ledger of up to 500 segments for every one, for good).
   * Added again, it begins afresh, as its usage does from its new `addedAt`.
   */
  private forgetIfGone(model: string): void {
    if (this.options.listed?.(model) !== false) return;
    for (const key of this.replicas.keys()) if (key.startsWith(`${model}\u0000`)) return;
    this.ledgers.delete(model);
  }

  close(): void {
    clearTimeout(this.slotCheck);
    this.listeners.clear();
  }

  private checkSlots(): void {
    const read = this.options.slots;
    if (!read || this.slotCheck) return;
    // The slot finishes its swap in the same turn the target becomes ready; look just after.
    this.slotCheck = setTimeout(() => {
      this.slotCheck = undefined;
      read()
        .then((statuses) => this.noteSlots(statuses))
        .catch(() => {});
    }, 50);
    this.slotCheck.unref();
  }

  private ledger(model: string): ModelLedger {
    let ledger = this.ledgers.get(model);
    const addedAt = this.options.addedAt?.(model);
    if (!ledger) {
      ledger = { awakeMs: 0, peak: 0, segments: [{ tier: "cold", from: this.startedAt }], addedAt };
      this.ledgers.set(model, ledger);
    } else if (addedAt !== undefined && addedAt > this.startedAt && addedAt !== ledger.addedAt) {
      // Removed, then added again by a reload: its GPU time counts afresh, as its usage's elapsed does.
      ledger.awakeMs = 0;
      ledger.peak = 0;
      ledger.addedAt = addedAt;
    }
    return ledger;
  }

  /** A replica of `model` changed: its tier segment and its peak of awake replicas. */
  private modelChanged(model: string, when: number): void {
    const at = Math.max(when, this.startedAt);
    const ledger = this.ledger(model);
    let tier: Tier = "cold";
    let awake = 0;
    for (const [key, state] of this.replicas) {
      if (!key.startsWith(`${model}\u0000`)) continue;
      if (order.indexOf(state.tier) < order.indexOf(tier)) tier = state.tier;
      if (isResident(state.tier)) awake++;
    }
    ledger.peak = Math.max(ledger.peak, awake);
    const current = ledger.segments.at(-1)!;
    if (current.tier === tier) return;
    if (current.from >= at) {
      // Nothing lasted in between (the first events describe what already runs): it was this tier.
      current.tier = tier;
      const previous = ledger.segments.at(-2);
      if (previous?.tier === tier) {
        ledger.segments.pop();
        previous.to = undefined;
      }
      return;
    }
    current.to = at;
    ledger.segments.push({ tier, from: at });
    if (ledger.segments.length > maxSegments) ledger.segments.shift();
  }

  private add(entry: Omit<TimelineEntry, "seq">): void {
    const full = { seq: ++this.seq, ...entry };
    this.list.push(full);
    this.prune();
    this.publish({ type: "entry", entry: full });
  }

  private prune(): void {
    const cutoff = this.now() - this.windowMs;
    while (this.list.length > this.maxEntries || (this.list[0] && Date.parse(this.list[0].at) < cutoff))
      this.list.shift();
  }

  private publish(message: TimelineMessage): void {
    for (const listener of this.listeners) {
      try {
        listener(message);
      } catch {
        // A broken listener (a closed stream) must not keep the others from hearing.
      }
    }
  }
}

const iso = (ms: number) => new Date(ms).toISOString();
