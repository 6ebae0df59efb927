import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { Tier } from "../lib/replica-event.ts";
import { decideSlot, isResident, type SlotMember, type SlotState } from "./slot-arbiter.ts";

/**
 * The arbiter with prewarms in the mix, on random slot states: a prewarm is the lowest priority
 * there is. Whatever the members' state, the policy and the clock:
 * - a decision for a prewarm never drains a busy resident (one with requests in flight or held);
 * - while a request waits (and may activate), no prewarm is granted the slot;
 * - a resident that is only prewarmed yields to a waiting request at once.
 */
const tiers: Tier[] = ["cold", "asleep-1", "asleep-2", "starting", "waking", "ready", "draining"];

const member = (i: number): fc.Arbitrary<SlotMember> =>
  fc.record({
    model: fc.constant(`m${i}`),
    priority: fc.integer({ min: -2, max: 2 }),
    tier: fc.constantFrom(...tiers),
    inFlight: fc.constantFrom(0, 0, 1, 3),
    held: fc.constantFrom(0, 0, 0, 1, 2),
    heldSince: fc.integer({ min: 0, max: 100_000 }),
    backoffUntil: fc.constantFrom(0, 0, 0, 150_000),
    prewarm: fc.boolean(),
    idleSince: fc.integer({ min: 0, max: 200_000 }),
  });

const state: fc.Arbitrary<SlotState> = fc
  .record({
    policy: fc.constantFrom("sticky" as const, "fifo" as const, "priority" as const),
    members: fc.tuple(member(0), member(1), member(2), member(3)),
    minResidency: fc.constantFrom(0, 30_000),
    swapCooldown: fc.constantFrom(0, 5_000),
    maxWait: fc.constantFrom(60_000, 120_000),
    preemptAfter: fc.constantFrom(0, 60_000),
    residentSince: fc.integer({ min: 0, max: 200_000 }),
    lastSwapAt: fc.integer({ min: 0, max: 200_000 }),
    now: fc.integer({ min: 100_000, max: 300_000 }),
  })
  .map(({ members, ...rest }) => {
    // At most one resident, as the slot keeps it; a member's held work has a heldSince.
    let seen = false;
    const fixed = members.map((m) => {
      const tier = isResident(m.tier) ? (seen ? "asleep-1" : m.tier) : m.tier;
      if (isResident(m.tier)) seen = true;
      const busy = m.inFlight > 0 || m.held > 0;
      return {
        ...m,
        tier,
        heldSince: m.held > 0 ? m.heldSince : undefined,
        // A member with work is not idle; a prewarm flag is only set without work.
        prewarm: m.prewarm && !busy,
        idleSince: busy ? undefined : m.idleSince,
      };
    });
    return { ...rest, members: fixed };
  });

describe("property: prewarms in the slot arbiter", () => {
  test("never evict a busy resident, never beat a waiting request, and yield to one at once", () => {
    fc.assert(
      fc.property(state, (s) => {
        const decision = decideSlot(s);
        const resident = s.members.find((m) => isResident(m.tier));
        const waiting = s.members.filter(
          (m) => m !== resident && m.held > 0 && m.heldSince !== undefined && m.backoffUntil <= s.now,
        );
        if (decision.kind === "wait") {
          // A prewarmed, idle, ready resident never keeps a waiting request out.
          if (
            resident?.tier === "ready" &&
            resident.prewarm &&
            resident.inFlight === 0 &&
            resident.held === 0 &&
            waiting.length > 0
          )
            expect.unreachable("a waiting request was kept out by a prewarmed resident");
          return;
        }
        const target = s.members.find((m) => m.model === decision.to)!;
        if (decision.prewarm) {
          expect(waiting).toEqual([]);
          expect(target.held).toBe(0);
          if (decision.kind === "swap") {
            expect(resident).toBeDefined();
            expect(resident!.inFlight).toBe(0);
            expect(resident!.held).toBe(0);
            expect(resident!.prewarm).toBeFalsy();
          }
        } else {
          // A decision for real demand goes to a member with requests waiting.
          expect(target.held).toBeGreaterThan(0);
        }
      }),
      { numRuns: 5_000 },
    );
  });
});
