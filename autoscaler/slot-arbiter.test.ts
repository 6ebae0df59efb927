import { describe, expect, test } from "vitest";
import { decideSlot, type SlotMember, type SlotState } from "./slot-arbiter.ts";

const member = (model: string, patch: Partial<SlotMember> = {}): SlotMember => ({
  model,
  priority: 0,
  tier: "asleep-1",
  inFlight: 0,
  held: 0,
  backoffUntil: 0,
  ...patch,
});
const state = (members: SlotMember[], patch: Partial<SlotState> = {}): SlotState => ({
  policy: "sticky",
  minResidency: 30_000,
  swapCooldown: 5_000,
  maxWait: 120_000,
  preemptAfter: 60_000,
  members,
  residentSince: 0,
  lastSwapAt: Number.NEGATIVE_INFINITY,
  now: 100_000,
  ...patch,
});

describe("decideSlot (sticky)", () => {
  test("an empty slot goes to the highest priority, then the oldest request", () => {
    const members = [
      member("a", { held: 1, heldSince: 10 }),
      member("b", { held: 1, heldSince: 20, priority: 1 }),
      member("c", { held: 1, heldSince: 5 }),
    ];
    expect(decideSlot(state(members))).toMatchObject({ kind: "grant", to: "b" });
    members[1]!.priority = 0;
    expect(decideSlot(state(members))).toMatchObject({ kind: "grant", to: "c" });
  });

  test("demand for the resident never swaps", () => {
    expect(decideSlot(state([member("a", { tier: "ready", held: 5, heldSince: 1 }), member("b")]))).toEqual({
      kind: "wait",
      at: Number.POSITIVE_INFINITY,
    });
  });

  test("a busy resident keeps the slot until the waiting member has waited maxWait", () => {
    const members = [
      member("a", { tier: "ready", inFlight: 3 }),
      member("b", { held: 1, heldSince: 50_000 }),
    ];
    expect(decideSlot(state(members))).toEqual({ kind: "wait", at: 170_000 });
    expect(decideSlot(state(members, { now: 170_000 }))).toMatchObject({ kind: "swap", to: "b" });
  });

  test("an idle resident keeps the slot for minResidency, and swaps are spaced by swapCooldown", () => {
    const members = [member("a", { tier: "ready" }), member("b", { held: 1, heldSince: 99_000 })];
    expect(decideSlot(state(members, { residentSince: 90_000 }))).toEqual({ kind: "wait", at: 120_000 });
    expect(decideSlot(state(members, { residentSince: 0, lastSwapAt: 98_000 }))).toEqual({
      kind: "wait",
      at: 103_000,
    });
    expect(decideSlot(state(members, { residentSince: 0 }))).toMatchObject({ kind: "swap", to: "b" });
  });

  test("a higher priority preempts a busy resident only after preemptAfter", () => {
    const members = [
      member("a", { tier: "ready", inFlight: 1 }),
      member("b", { held: 1, heldSince: 60_000, priority: 5 }),
    ];
    expect(decideSlot(state(members))).toEqual({ kind: "wait", at: 120_000 });
    expect(decideSlot(state(members, { now: 120_000 }))).toEqual({
      kind: "swap",
      to: "b",
      reason: "higher priority waited past preemptAfter",
    });
  });

  test("a swap in motion is not interrupted; a member in back-off waits it out", () => {
    expect(
      decideSlot(state([member("a", { tier: "waking" }), member("b", { held: 1, heldSince: 0 })])),
    ).toMatchObject({ kind: "wait" });
    expect(decideSlot(state([member("a", { held: 1, heldSince: 0, backoffUntil: 105_000 })]))).toEqual({
      kind: "wait",
      at: 105_000,
    });
  });

  test("a resident serves its own older requests before a starved member takes over", () => {
    const members = [
      member("a", { tier: "ready", held: 2, heldSince: 1_000, inFlight: 4 }),
      member("b", { held: 1, heldSince: 2_000 }),
    ];
    expect(decideSlot(state(members, { now: 1_000_000 }))).toMatchObject({ kind: "wait" });
  });
});

describe("decideSlot (other policies)", () => {
  test("fifo swaps to whoever waits longest as soon as the resident's work is younger", () => {
    const members = [
      member("a", { tier: "ready", inFlight: 1 }),
      member("b", { held: 1, heldSince: 99_000 }),
    ];
    expect(decideSlot(state(members, { policy: "fifo", residentSince: 99_999 }))).toMatchObject({
      kind: "swap",
      to: "b",
    });
  });

  test("priority preempts a busy resident at once, and says so", () => {
    // Found by an outside tester: the swap's reason said it had waited past preemptAfter.
    const members = [
      member("a", { tier: "ready", inFlight: 1 }),
      member("b", { held: 1, heldSince: 99_999, priority: 1 }),
    ];
    expect(decideSlot(state(members, { policy: "priority" }))).toEqual({
      kind: "swap",
      to: "b",
      reason: "a higher priority preempts",
    });
  });

  test("priority preempts at once, even within minResidency", () => {
    const members = [
      member("a", { tier: "ready" }),
      member("b", { held: 1, heldSince: 99_999, priority: 1 }),
    ];
    expect(decideSlot(state(members, { policy: "priority", residentSince: 99_000 }))).toMatchObject({
      kind: "swap",
      to: "b",
    });
  });
});

describe("decideSlot (a resident's starved requests)", () => {
  // Found by an outside tester: under `priority`, a member with `concurrency: 1` that took the slot
  // at maxWait was preempted as soon as it was ready, its first request in flight and the rest
  // held again for another maxWait: one request served per round of two swaps.
  const starvedResident = (heldSince: number) => [
    member("low", { tier: "ready", inFlight: 1, held: 3, heldSince }),
    member("high", { held: 2, heldSince: 95_000, priority: 1 }),
  ];

  test.each(["priority", "sticky"] as const)(
    "%s: a higher priority waits while the resident serves requests that waited maxWait",
    (policy) => {
      const members = starvedResident(10_000);
      expect(decideSlot(state(members, { policy, maxWait: 20_000, now: 200_000 }))).toEqual({
        kind: "wait",
        at: Number.POSITIVE_INFINITY,
      });
    },
  );

  test("priority: a resident whose held requests have not waited maxWait is preempted at once", () => {
    const members = starvedResident(90_000);
    expect(decideSlot(state(members, { policy: "priority", maxWait: 20_000 }))).toEqual({
      kind: "swap",
      to: "high",
      reason: "a higher priority preempts",
    });
  });
});
