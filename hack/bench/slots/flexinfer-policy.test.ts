import { describe, expect, test } from "vitest";
import { flexInferPolicy } from "./flexinfer-policy.ts";
import type { BenchSlotMember, BenchSlotState } from "./policy.ts";

const member = (model: string, patch: Partial<BenchSlotMember> = {}): BenchSlotMember => ({
  model,
  priority: 0,
  tier: "asleep-1",
  inFlight: 0,
  held: 0,
  backoffUntil: 0,
  ...patch,
});
const state = (members: BenchSlotMember[], now: number): BenchSlotState => ({
  minResidency: 30_000,
  swapCooldown: 5_000,
  maxWait: 120_000,
  preemptAfter: 60_000,
  members,
  residentSince: 0,
  lastSwapAt: Number.NEGATIVE_INFINITY,
  now,
});
const minute = 60_000;

describe("the FlexInfer-like policy", () => {
  test("an empty slot goes to the member in demand with the highest priority, then the latest request", () => {
    const decide = flexInferPolicy().decide;
    const members = [
      member("a", { held: 3, heldSince: 0, lastRequestAt: 10_000 }),
      member("b", { held: 1, heldSince: 5_000, lastRequestAt: 20_000 }),
    ];
    // Not the oldest request (a), the most recent one (b).
    expect(decide(state(members, 30_000))).toMatchObject({ kind: "grant", to: "b" });
    members[0]!.priority = 1;
    expect(decide(state(members, 30_000))).toMatchObject({ kind: "grant", to: "a" });
  });

  test("the resident keeps the slot until it has had no request for the demand window", () => {
    const decide = flexInferPolicy().decide;
    const members = [
      member("a", { tier: "ready", lastRequestAt: 1 * minute }),
      member("b", { held: 1, heldSince: 2 * minute, lastRequestAt: 2 * minute }),
    ];
    expect(decide(state(members, 2 * minute))).toEqual({ kind: "wait", at: 3 * minute });
    // Busy or not, an idle-by-arrivals resident is swapped out (the drain finishes its work).
    members[0]!.inFlight = 4;
    expect(decide(state(members, 3 * minute))).toMatchObject({ kind: "swap", to: "b" });
  });

  test("demand expires with the window even while requests still wait", () => {
    const decide = flexInferPolicy().decide;
    const members = [
      member("a", { tier: "ready", lastRequestAt: 1 * minute }),
      member("b", { held: 1, heldSince: 0, lastRequestAt: 0 }),
    ];
    expect(decide(state(members, 3 * minute))).toEqual({ kind: "wait", at: Number.POSITIVE_INFINITY });
    // A new request re-signals demand.
    members[1]!.lastRequestAt = 3 * minute;
    expect(decide(state(members, 3 * minute))).toMatchObject({ kind: "swap", to: "b" });
  });

  test("after a swap, no other for the swap cooldown, whatever the demand", () => {
    const decide = flexInferPolicy().decide;
    const before = [member("a", { tier: "ready" }), member("b", { held: 1, heldSince: 0, lastRequestAt: 0 })];
    expect(decide(state(before, 10_000))).toMatchObject({ kind: "swap", to: "b" });
    const after = [
      member("a", { held: 1, heldSince: 20_000, lastRequestAt: 20_000 }),
      member("b", { tier: "ready" }),
    ];
    expect(decide(state(after, 4 * minute))).toEqual({ kind: "wait", at: 10_000 + 5 * minute });
    expect(decide(state(after, 10_000 + 5 * minute))).toEqual({ kind: "wait", at: Number.POSITIVE_INFINITY });
    after[0]!.lastRequestAt = 10_000 + 5 * minute;
    expect(decide(state(after, 10_000 + 5 * minute))).toMatchObject({ kind: "swap", to: "a" });
  });

  test("a lower priority never takes the slot from an idle higher one; a swap in motion is left alone", () => {
    const decide = flexInferPolicy().decide;
    const members = [
      member("a", { tier: "ready", priority: 5 }),
      member("b", { held: 1, heldSince: 0, lastRequestAt: 10 * minute }),
    ];
    expect(decide(state(members, 10 * minute))).toEqual({ kind: "wait", at: Number.POSITIVE_INFINITY });
    members[0]!.priority = 0;
    members[0]!.tier = "waking";
    expect(decide(state(members, 10 * minute))).toEqual({ kind: "wait", at: Number.POSITIVE_INFINITY });
  });
});
