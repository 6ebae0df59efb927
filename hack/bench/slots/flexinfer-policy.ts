import { isResident, type SlotDecision } from "../../../autoscaler/slot-arbiter.ts";
import type { BenchSlotMember, BenchSlotState, PolicyUnderTest } from "./policy.ts";

/**
 * A FlexInfer-like slot policy: the leader election of FlexInfer's v1alpha2
 * shared GPU groups (`chooseSharedGroupLeader`), as its documentation
 * describes it, expressed as a decision on Snooze's slot state.
 *
 * 1. Anti-thrashing: within `swapCooldown` of the last preemption the resident
 *    keeps the slot, whatever the demand or priorities.
 * 2. A member is in demand when a request for it arrived within
 *    `demandWindow`; "recent" is the same within `recentWindow`.
 * 3. The only swap: a member in demand (highest priority, then most recent
 *    request, then name) takes the slot when the resident has had no request
 *    for `demandWindow` and the newcomer's priority is at least the
 *    resident's.
 * 4. Otherwise the resident stays; an empty slot goes to the member in
 *    demand, else the most recent one, else any.
 *
 * Assumptions where the documentation leaves room (see docs/slots.md):
 * - "LastActiveTime" is the arrival of the member's latest request, for the
 *   resident as for the others. A held request does not renew it, so demand
 *   expires `demandWindow` after the last arrival even while requests still
 *   wait (FlexInfer: "a new request is needed to re-signal demand").
 * - Only members with held requests are activated (Snooze never wakes a model
 *   nobody waits for); FlexInfer's recent/fallback leader would also pick an
 *   idle one.
 * - The preemption time is when this policy decided the swap (FlexInfer
 *   stamps `preemptedAt` when it scales the incumbent down).
 * - FlexInfer's ~3 s reconcile period and its own start-up mechanics are not
 *   modelled: every policy's decisions are carried out by the same simulated
 *   Snooze slot (drain, sleep at level 1, wake, warm-up).
 */
export interface FlexInferOptions {
  demandWindow: number;
  recentWindow: number;
  swapCooldown: number;
}

export const flexInferDefaults: FlexInferOptions = {
  demandWindow: 2 * 60_000,
  recentWindow: 5 * 60_000,
  swapCooldown: 5 * 60_000,
};

const never = Number.POSITIVE_INFINITY;

export function flexInferPolicy(options: FlexInferOptions = flexInferDefaults): PolicyUnderTest {
  let preemptedAt = Number.NEGATIVE_INFINITY;
  const decide = (state: BenchSlotState): SlotDecision => {
    const { members, now } = state;
    const within = (m: BenchSlotMember, window: number) =>
      m.lastRequestAt !== undefined && now - m.lastRequestAt < window;
    const resident = members.find((m) => isResident(m.tier));
    const wanting = members.filter((m) => m !== resident && m.held > 0);
    const eligible = wanting.filter((m) => m.backoffUntil <= now);
    if (eligible.length === 0) return { kind: "wait", at: Math.min(...wanting.map((m) => m.backoffUntil)) };
    const demanded = leader(eligible.filter((m) => within(m, options.demandWindow)));

    if (!resident) {
      const chosen =
        demanded ?? leader(eligible.filter((m) => within(m, options.recentWindow))) ?? leader(eligible)!;
      return {
        kind: "grant",
        to: chosen.model,
        reason: demanded ? "in demand" : "no member in demand; most recent",
      };
    }
    // A swap in motion is not interrupted.
    if (resident.tier !== "ready") return { kind: "wait", at: never };
    // Stage 1: anti-thrashing.
    const cooldownEnds = preemptedAt + options.swapCooldown;
    if (now < cooldownEnds) return { kind: "wait", at: cooldownEnds };
    // Stage 3: demand-based preemption, the only path to a swap. Without demand, a new request
    // (which re-evaluates the slot) is needed.
    if (!demanded) return { kind: "wait", at: never };
    const residentIdleAt =
      resident.lastRequestAt === undefined
        ? Number.NEGATIVE_INFINITY
        : resident.lastRequestAt + options.demandWindow;
    // Look again when the resident turns idle (the newcomer's demand may have expired by then).
    if (now < residentIdleAt) return { kind: "wait", at: residentIdleAt };
    if (demanded.priority < resident.priority) return { kind: "wait", at: never };
    preemptedAt = now;
    return {
      kind: "swap",
      to: demanded.model,
      reason: "in demand, and the resident idle for the demand window",
    };
  };
  return { name: "flexinfer-like", decide };
}

/** Highest priority, then most recent request, then name: FlexInfer's tie-break within a category. */
function leader(members: BenchSlotMember[]): BenchSlotMember | undefined {
  return [...members].sort(
    (a, b) =>
      b.priority - a.priority ||
      (b.lastRequestAt ?? Number.NEGATIVE_INFINITY) - (a.lastRequestAt ?? Number.NEGATIVE_INFINITY) ||
      a.model.localeCompare(b.model),
  )[0];
}
