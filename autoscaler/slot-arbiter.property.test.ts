import fc from "fast-check";
import { describe, expect, test } from "vitest";
import type { Tier } from "../lib/replica-event.ts";
import { decideSlot, isResident, type SlotMember, type SlotPolicy } from "./slot-arbiter.ts";

/**
 * A discrete-time world around the pure arbiter: members whose requests
 * arrive at random, swaps that take random time and sometimes fail, requests
 * that give up at their hold budget. The executor does what Slot does: one
 * grant or swap at a time, the incumbent fully asleep before the target wakes.
 */
interface Scenario {
  policy: SlotPolicy;
  priorities: number[];
  arrivals: { at: number; member: number; work: number }[];
  activateMs: number[];
  sleepMs: number;
  failures: boolean[];
}

const step = 10;
const settings = {
  minResidency: 500,
  swapCooldown: 200,
  maxWait: 2_000,
  preemptAfter: 1_000,
  drainTimeout: 1_500,
};
const budget = 20_000;

function run(scenario: Scenario) {
  const n = scenario.priorities.length;
  const tier: Tier[] = Array.from({ length: n }, () => "asleep-1");
  const held: { at: number; work: number }[][] = Array.from({ length: n }, () => []);
  const running: number[][] = Array.from({ length: n }, () => []); // finish times
  let op:
    | {
        to: number;
        from?: number;
        phase: "drain" | "sleep" | "activate";
        until: number;
        drainDeadline: number;
      }
    | undefined;
  let residentSince = 0;
  let lastSwapAt = Number.NEGATIVE_INFINITY;
  let failureIndex = 0;
  const outcomes: { arrived: number; ended: number; answered: boolean; member: number }[] = [];
  const violations: string[] = [];
  const arrivals = [...scenario.arrivals].sort((a, b) => a.at - b.at);
  const end = (arrivals.at(-1)?.at ?? 0) + budget + 10_000;

  for (let now = 0; now <= end; now += step) {
    while (arrivals.length && arrivals[0]!.at <= now) {
      const { member, work } = arrivals.shift()!;
      held[member]!.push({ at: now, work });
    }
    // Progress the operation in flight.
    if (op) {
      if (op.phase === "drain" && (running[op.from!]!.length === 0 || now >= op.drainDeadline)) {
        op.phase = "sleep";
        op.until = now + scenario.sleepMs;
      } else if (op.phase === "sleep" && now >= op.until) {
        tier[op.from!] = "asleep-1";
        running[op.from!] = []; // mode=wait finished them; past the drain timeout they were cut
        op.phase = "activate";
        tier[op.to] = "waking";
        op.until = now + scenario.activateMs[op.to % scenario.activateMs.length]!;
      } else if (op.phase === "activate" && now >= op.until) {
        const failed = scenario.failures[failureIndex++ % scenario.failures.length]!;
        tier[op.to] = failed ? "asleep-1" : "ready";
        if (failed) {
          for (const r of held[op.to]!.splice(0))
            outcomes.push({ arrived: r.at, ended: now, answered: false, member: op.to });
        } else residentSince = now;
        if (op.from !== undefined) lastSwapAt = now;
        op = undefined;
      }
    }
    for (let m = 0; m < n; m++) {
      running[m] = running[m]!.filter((finish) => finish > now);
      // Dispatch to a ready resident (at once, as the activator does on the ready event); expire what
      // waited past its budget.
      if (tier[m] === "ready")
        for (const r of held[m]!.splice(0)) {
          running[m]!.push(now + r.work);
          outcomes.push({ arrived: r.at, ended: now, answered: true, member: m });
        }
      for (const r of held[m]!.filter((r) => now - r.at >= budget)) {
        outcomes.push({ arrived: r.at, ended: now, answered: false, member: m });
      }
      held[m] = held[m]!.filter((r) => now - r.at < budget);
    }
    const residents = tier.filter(isResident).length;
    if (residents > 1) violations.push(`t=${now}: ${residents} residents`);
    if (op) continue;
    const members: SlotMember[] = tier.map((t, m) => ({
      model: String(m),
      priority: scenario.priorities[m]!,
      tier: t,
      inFlight: running[m]!.length,
      held: held[m]!.length,
      heldSince: held[m]![0]?.at,
      backoffUntil: 0,
    }));
    const decision = decideSlot({
      policy: scenario.policy,
      ...settings,
      members,
      residentSince,
      lastSwapAt,
      now,
    });
    if (decision.kind === "wait") continue;
    const to = Number(decision.to);
    const from = tier.findIndex(isResident);
    if (decision.kind === "grant") {
      if (from >= 0) violations.push(`t=${now}: grant while ${from} is resident`);
      tier[to] = "waking";
      op = {
        to,
        phase: "activate",
        until: now + scenario.activateMs[to % scenario.activateMs.length]!,
        drainDeadline: 0,
      };
    } else {
      if (from < 0 || tier[from] !== "ready") violations.push(`t=${now}: swap without a ready resident`);
      tier[from] = "draining";
      op = { to, from, phase: "drain", until: 0, drainDeadline: now + settings.drainTimeout };
    }
  }
  return { outcomes, violations, requests: scenario.arrivals.length };
}

const scenarios = (policy: SlotPolicy) =>
  fc.record({
    policy: fc.constant(policy),
    priorities: fc.array(fc.integer({ min: 0, max: 3 }), { minLength: 2, maxLength: 3 }),
    arrivals: fc.array(
      fc.record({
        at: fc.integer({ min: 0, max: 30_000 }),
        member: fc.integer({ min: 0, max: 2 }),
        work: fc.integer({ min: 10, max: 3_000 }),
      }),
      { maxLength: 60 },
    ),
    activateMs: fc.array(fc.integer({ min: 50, max: 1_500 }), { minLength: 1, maxLength: 3 }),
    sleepMs: fc.integer({ min: 10, max: 500 }),
    failures: fc.array(fc.boolean(), { minLength: 1, maxLength: 5 }).map((f) => [...f, false]),
  });

const fix = (s: Scenario): Scenario => ({
  ...s,
  arrivals: s.arrivals.map((a) => ({ ...a, member: a.member % s.priorities.length })),
});

describe.each(["sticky", "priority", "fifo"] as const)("the %s arbiter in a random world", (policy) => {
  test("at most one resident, every request ends before its budget, none starves", () => {
    fc.assert(
      fc.property(scenarios(policy).map(fix), (scenario) => {
        const { outcomes, violations, requests } = run(scenario);
        expect(violations).toEqual([]);
        // Every request was answered or refused, and none waited past its budget.
        expect(outcomes).toHaveLength(requests);
        for (const o of outcomes) expect(o.ended - o.arrived).toBeLessThanOrEqual(budget);
        if (policy === "fifo") return;
        // No starvation: a member is passed over at most maxWait, plus the swaps ahead of it
        // (each: drain timeout + sleep + activation), one per other member.
        const swapMax =
          settings.drainTimeout + scenario.sleepMs + Math.max(...scenario.activateMs) + 4 * step;
        const bound = settings.maxWait + (scenario.priorities.length - 1) * swapMax + swapMax;
        for (const o of outcomes.filter((o) => o.answered))
          expect(o.ended - o.arrived).toBeLessThanOrEqual(bound);
      }),
      { numRuns: 150 },
    );
  });
});
