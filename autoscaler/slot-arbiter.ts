import { isResident, residentTiers, type Tier } from "../lib/replica-event.ts";

/**
 * Who holds a slot (one exclusive accelerator) next, as a pure function of the
 * members' state and the clock. At most one member is resident (starting,
 * waking, ready or draining); this function only says when to hand the slot
 * over, never how.
 */
export type SlotPolicy = "sticky" | "fifo" | "priority";

export interface SlotMember {
  model: string;
  priority: number;
  tier: Tier;
  inFlight: number;
  /** Held requests, and one more while a person's wake waits (it waits as a request would). */
  held: number;
  /** A person's wake (`snooze wake`, the admin API, a CloudEvent) waits: one of `held`. */
  wake?: boolean;
  /** When its oldest held request arrived (epoch ms); undefined when none is held. */
  heldSince?: number;
  /** After repeated failures it may not activate before this moment. */
  backoffUntil: number;
  /**
   * Wanted awake for a prewarm (ahead of a predicted or announced request), not for a request:
   * the lowest priority there is. A resident with this set and no work yields to any request.
   */
  prewarm?: boolean;
  /** When its last work ended (epoch ms): a prewarm evicts only a resident idle this long. */
  idleSince?: number;
}

export interface SlotState {
  policy: SlotPolicy;
  minResidency: number;
  swapCooldown: number;
  maxWait: number;
  preemptAfter: number;
  members: SlotMember[];
  /** When the current resident became resident. */
  residentSince: number;
  /** When the last swap finished. */
  lastSwapAt: number;
  now: number;
}

export type SlotDecision =
  /** Nobody is resident: let `to` activate (`prewarm`: for a prewarm, not a request). */
  | { kind: "grant"; to: string; reason: string; prewarm?: true }
  /** Drain and sleep the resident, then let `to` activate. */
  | { kind: "swap"; to: string; reason: string; prewarm?: true }
  /** Nothing to do until `at` (Infinity: until something changes). */
  | { kind: "wait"; at: number };

export { isResident, residentTiers };

const never = Number.POSITIVE_INFINITY;
/** A prewarm evicts an idle resident only once it has been idle this long (and past minResidency). */
export const prewarmEvictsIdleAfterMs = 60_000;

export function decideSlot(state: SlotState): SlotDecision {
  const { members, now } = state;
  const resident = members.find((m) => isResident(m.tier));
  const wanting = members.filter((m) => m !== resident && m.held > 0 && m.heldSince !== undefined);
  const waiting = wanting.filter((m) => m.backoffUntil <= now);
  if (waiting.length === 0) {
    // No request waits: a prewarm may have the slot, at the lowest priority.
    const prewarm = decidePrewarm(state, resident);
    const backoff = Math.min(...wanting.map((m) => m.backoffUntil));
    if (prewarm.kind !== "wait") return prewarm;
    return { kind: "wait", at: Math.min(backoff, prewarm.at) };
  }
  const longest = [...waiting].sort((a, b) => a.heldSince! - b.heldSince!)[0]!;
  const best = state.policy === "fifo" ? longest : byPriorityThenAge(waiting)!;
  if (!resident)
    return {
      kind: "grant",
      to: best.model,
      reason: state.policy === "fifo" ? "waited longest" : "highest priority, then oldest request",
    };
  // A swap in motion (the resident is still coming up or already leaving) is not interrupted.
  if (resident.tier !== "ready") return { kind: "wait", at: never };

  const busy = resident.inFlight > 0 || resident.held > 0;
  const residentOldest = resident.held > 0 ? resident.heldSince! : never;
  if (state.policy === "fifo") {
    // The baseline: whoever has waited longest goes next, as soon as the resident's oldest work is younger.
    return longest.heldSince! < residentOldest
      ? { kind: "swap", to: longest.model, reason: "waited longest" }
      : { kind: "wait", at: never };
  }

  // No member is passed over for longer than maxWait, whatever the priorities; but a resident first
  // serves its own requests that are older still, or two starved members would swap back and forth
  // without either serving anything.
  const starvedAt = longest.heldSince! < residentOldest ? longest.heldSince! + state.maxWait : never;
  if (now >= starvedAt)
    return { kind: "swap", to: longest.model, reason: `waited past maxWait (${state.maxWait}ms)` };

  // Nor does a higher priority take the slot while the resident holds requests that have waited
  // maxWait themselves: each preemption would serve only what the resident had in flight, and the
  // rest would wait another maxWait for every turn back (found by an outside tester: under
  // `priority`, a member with `concurrency: 1` served one request per round of swaps).
  const residentStarved = residentOldest + state.maxWait <= now;
  const preemptor = residentStarved
    ? undefined
    : byPriorityThenAge(waiting.filter((m) => m.priority > resident.priority));
  const preemptAt = preemptor
    ? preemptor.heldSince! + (state.policy === "priority" ? 0 : state.preemptAfter)
    : never;
  if (busy) {
    if (preemptor && now >= preemptAt)
      return {
        kind: "swap",
        to: preemptor.model,
        // Under `priority` a higher priority takes a busy slot at once; other policies wait first.
        reason:
          state.policy === "priority"
            ? "a higher priority preempts"
            : "higher priority waited past preemptAfter",
      };
    return { kind: "wait", at: Math.min(starvedAt, preemptAt) };
  }

  // Real demand wins over a prewarm: a resident that is only prewarmed yields at once.
  if (resident.prewarm)
    return { kind: "swap", to: best.model, reason: "a request waits; the resident is only prewarmed" };

  // The resident is idle: it keeps the slot for minResidency, and swaps are spaced by swapCooldown.
  const mayLeaveAt = Math.max(
    state.residentSince + state.minResidency,
    state.lastSwapAt + state.swapCooldown,
  );
  const higher = preemptor && state.policy === "priority";
  if (now < mayLeaveAt && !higher) return { kind: "wait", at: Math.min(mayLeaveAt, starvedAt) };
  return { kind: "swap", to: best.model, reason: "the resident is idle" };
}

/**
 * With no request waiting: a member that wants the slot for a prewarm gets it when it is free, or
 * when its resident is ready, has no work (nothing in flight or held, no prewarm of its own), has
 * been idle for `prewarmEvictsIdleAfterMs`, and may leave (minResidency, swapCooldown). A busy
 * resident is never evicted for a prewarm.
 */
function decidePrewarm(state: SlotState, resident: SlotMember | undefined): SlotDecision {
  const { now } = state;
  const wanting = state.members.filter((m) => m !== resident && m.prewarm && m.held === 0);
  const ready = wanting.filter((m) => m.backoffUntil <= now);
  const backoff = Math.min(...wanting.map((m) => m.backoffUntil));
  if (ready.length === 0) return { kind: "wait", at: backoff };
  const best = [...ready].sort((a, b) => b.priority - a.priority || a.model.localeCompare(b.model))[0]!;
  if (!resident) return { kind: "grant", to: best.model, reason: "prewarm; the slot is free", prewarm: true };
  if (resident.tier !== "ready" || resident.inFlight > 0 || resident.held > 0 || resident.prewarm)
    return { kind: "wait", at: never };
  const mayLeaveAt = Math.max(
    state.residentSince + state.minResidency,
    state.lastSwapAt + state.swapCooldown,
    (resident.idleSince ?? now) + prewarmEvictsIdleAfterMs,
  );
  if (now < mayLeaveAt) return { kind: "wait", at: mayLeaveAt };
  return { kind: "swap", to: best.model, reason: "prewarm; the resident is idle", prewarm: true };
}

function byPriorityThenAge(members: SlotMember[]): SlotMember | undefined {
  return [...members].sort((a, b) => b.priority - a.priority || a.heldSince! - b.heldSince!)[0];
}
