import fc from "fast-check";
import { expect, test } from "vitest";
import { arrivalBins, encodeCounts } from "../lib/learning-snapshot.ts";
import { isResident } from "../lib/replica-event.ts";
import { Harness } from "../test/support/autoscaler-harness.ts";

/**
 * Three members of one slot on the manual clock, each with a history that makes a prewarm likely
 * at any time and a prewarm budget, under random requests. After every step and every timer:
 * - a member is never drained while it has a request in flight unless another member's request
 *   waits (a prewarm never evicts a busy resident);
 * - no member begins a prewarm's activation while another member has a request waiting (real
 *   demand always wins over a prewarm);
 * - no member's prewarm time today exceeds its budget.
 */
const members = ["a", "b", "c"] as const;
type Member = (typeof members)[number];
type Step = { kind: "request" | "start" | "done"; model: Member } | { kind: "advance"; ms: number };

const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("request" as const), model: fc.constantFrom(...members) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("start" as const), model: fc.constantFrom(...members) }),
  },
  {
    weight: 2,
    arbitrary: fc.record({ kind: fc.constant("done" as const), model: fc.constantFrom(...members) }),
  },
  {
    weight: 4,
    arbitrary: fc.record({
      kind: fc.constant("advance" as const),
      ms: fc.integer({ min: 0, max: 15 * 60_000 }),
    }),
  },
);

const budgetMs = 10 * 60_000;
/** Activations begun for a prewarm, over all runs: the property must have exercised some. */
let prewarmActivations = 0;

test("property: prewarms in a slot never evict a busy resident, never beat a request, never exceed the budget", async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(step, { minLength: 5, maxLength: 40 }), async (steps) => {
      const yaml = `
defaults:
  prewarmBudget: 10m
slots:
  gpu:
    minResidency: 5s
    swapCooldown: 2s
    maxWait: 1m
models:
${members.map((m) => `  ${m}:\n    slot: gpu\n    command: [engine, "\${PORT}"]`).join("\n")}
`;
      const h = new Harness(yaml, {
        autoUp: 5_000,
        onEngine: (engine) => {
          engine.latency.wake = 1_000;
          engine.latency.sleep = 500;
        },
      });
      const history = {
        version: 1 as const,
        updated: new Date(h.clock.now()).toISOString(),
        exposureWeeks: 2,
        arrivals: encodeCounts(new Array<number>(arrivalBins).fill(6)),
        gaps: "",
      };
      for (const m of members) h.controller(m).restoreLearning(history, "test");
      // What the activator knows: requests held and in flight per member.
      const held = new Map<Member, number>(members.map((m) => [m, 0]));
      const inFlight = new Map<Member, number>(members.map((m) => [m, 0]));
      const violations: string[] = [];
      const othersWaiting = (m: string) => members.some((o) => o !== m && held.get(o)! > 0);
      h.autoscaler.watch((event) => {
        const m = event.model as Member;
        if (event.tier === "draining" && inFlight.get(m)! > 0 && !othersWaiting(m))
          violations.push(`${m} drained at ${h.clock.now()} with a request in flight and nobody waiting`);
        if ((event.tier === "waking" || event.tier === "starting") && held.get(m) === 0) {
          prewarmActivations++;
          if (othersWaiting(m))
            violations.push(
              `${m} began an activation for a prewarm at ${h.clock.now()} while a request waited`,
            );
        }
      });
      const check = () => {
        const residents = members.filter((m) => isResident(h.controller(m).tier));
        if (residents.length > 1) violations.push(`two residents at ${h.clock.now()}: ${residents}`);
        for (const m of members) {
          const spent = h.controller(m).learner.snapshot(h.clock.now()).prewarm?.spentMs ?? 0;
          if (spent > budgetMs) violations.push(`${m} spent ${spent} ms of prewarm today`);
        }
      };
      const report = (m: Member) => h.stats(m, inFlight.get(m)!, held.get(m)!);
      for (const s of steps) {
        switch (s.kind) {
          case "request":
            held.set(s.model, held.get(s.model)! + 1);
            h.demand(s.model);
            report(s.model);
            break;
          case "start":
            // The activator dispatches what it holds once the model is ready.
            if (h.controller(s.model).tier === "ready") {
              inFlight.set(s.model, inFlight.get(s.model)! + held.get(s.model)! + 1);
              held.set(s.model, 0);
              report(s.model);
            }
            break;
          case "done":
            held.set(s.model, 0);
            inFlight.set(s.model, 0);
            report(s.model);
            break;
          case "advance":
            await h.advance(s.ms, check);
            break;
        }
        await h.settle();
        check();
      }
      expect(violations).toEqual([]);
    }),
    // A fixed seed keeps the suite deterministic and light; PROPERTY_SEED and PREWARM_PROPERTY_RUNS explore further.
    {
      numRuns: Number(process.env.PREWARM_PROPERTY_RUNS ?? 15),
      seed: Number(process.env.PROPERTY_SEED ?? 1),
    },
  );
  expect(prewarmActivations).toBeGreaterThan(10);
}, 120_000);
