import { describe, expect, test } from "vitest";
import type { EngineTimings } from "./engine-timings.ts";
import { flexInferPolicy } from "./flexinfer-policy.ts";
import { arbiterPolicy } from "./policy.ts";
import { type SimConfig, type SimModel, simulateSlot } from "./simulator.ts";
import type { TraceRequest } from "./trace.ts";

// Exact timings (no jitter), so every moment of a swap can be checked.
const engine: EngineTimings = {
  startMs: 40_000,
  stopMs: 1_000,
  sleepL1Ms: 500,
  wakeL1Ms: 2_000,
  sleepL2Ms: 300,
  wakeL2Ms: 10_000,
  warmupMs: 250,
  prefillTokensPerSecond: 1_000,
  decodeTokensPerSecond: 10,
  jitter: 0,
};
const member = (id: string, patch: Partial<SimModel> = {}): SimModel => ({
  id,
  priority: 0,
  inSlot: true,
  initialTier: "asleep-1",
  engine,
  ...patch,
});
const config = (models = [member("a"), member("b")]): SimConfig => ({
  models,
  slot: {
    minResidency: 30_000,
    swapCooldown: 5_000,
    drainTimeout: 60_000,
    maxWait: 120_000,
    preemptAfter: 60_000,
  },
  tier: {
    sleep: true,
    sleepAfter: 300_000,
    sleepLevel: 1,
    deepSleepAfter: 1_800_000,
    zeroAfter: 7_200_000,
    holdBudget: 300_000,
    queueDepth: 1_000,
    concurrency: 8,
    warmup: true,
    drainTimeout: 60_000,
  },
  seed: 1,
});
/** A request that runs `seconds` on an engine of the timings above (prefill 0.1 s + decode). */
const request = (id: number, model: string, at: number, seconds = 1): TraceRequest => ({
  id,
  model,
  at,
  inputTokens: 100,
  outputTokens: Math.round((seconds - 0.1) * 10),
});

describe("the slot simulation", () => {
  test("a swap: hold for b, a drains, sleeps, b wakes and warms up, held requests go", () => {
    const requests = [request(0, "a", 0, 5), request(1, "a", 1_000, 20), request(2, "b", 40_000)];
    const result = simulateSlot(requests, config(), arbiterPolicy("fifo"));
    const [grant, swap] = result.transitions;
    // a: wake 2 s + warm-up 0.25 s.
    expect(grant).toMatchObject({ kind: "grant", to: "a", decidedAt: 0, readyAt: 2_250 });
    // Both of a's requests ended by 22.25 s: at 40 s there is nothing to drain.
    expect(swap).toMatchObject({
      kind: "swap",
      from: "a",
      to: "b",
      decidedAt: 40_000,
      drainedAt: 40_000,
      asleepAt: 40_500,
      readyAt: 42_750,
    });
    expect(result.outcomes.map((o) => [o.result, o.holdMs])).toEqual([
      ["served", 2_250],
      ["served", 1_250],
      ["served", 2_750],
    ]);
    expect(result.swaps).toBe(1);
    expect(result.violations).toEqual([]);
  });

  test("a drain waits for in-flight work, bounded by drainTimeout; what still runs then is cut", () => {
    // a runs a 100 s request; b comes at 10 s; fifo swaps at once.
    const requests = [request(0, "a", 0, 100), request(1, "b", 10_000)];
    const result = simulateSlot(requests, config(), arbiterPolicy("fifo"));
    const swap = result.transitions[1]!;
    expect(swap.drainedAt).toBe(70_000); // drainTimeout
    expect(swap.asleepAt).toBe(70_000 + 500); // the request was cut, then the sleep took 0.5 s
    expect(result.outcomes[0]).toMatchObject({ result: "cut", ended: 70_000 });
    expect(result.outcomes[1]).toMatchObject({ result: "served", holdMs: 70_500 + 2_250 - 10_000 });
  });

  test("a request that ends within drainTimeout is served, and the sleep follows its end", () => {
    const requests = [request(0, "a", 0, 30), request(1, "b", 10_000)];
    const result = simulateSlot(requests, config(), arbiterPolicy("fifo"));
    expect(result.outcomes[0]).toMatchObject({ result: "served" });
    const ended = result.outcomes[0]!.ended!;
    expect(result.transitions[1]).toMatchObject({ drainedAt: ended, asleepAt: ended + 500 });
  });

  test("per-replica concurrency: the ninth of nine simultaneous requests waits for the first to end", () => {
    const requests = Array.from({ length: 9 }, (_, i) => request(i, "a", 0, i === 0 ? 2 : 10));
    const result = simulateSlot(requests, config(), arbiterPolicy("sticky"));
    expect(result.outcomes.slice(0, 8).map((o) => o.holdMs)).toEqual(Array(8).fill(2_250));
    expect(result.outcomes[8]!.holdMs).toBe(2_250 + 2_000);
  });

  test("a request held past the hold budget gets a 503 at the budget", () => {
    // flexinfer-like never swaps while the resident has had a request in the last 2 minutes.
    const requests: TraceRequest[] = [];
    for (let i = 0; i < 40; i++) requests.push(request(i, "a", i * 10_000));
    requests.push(request(40, "b", 5_000));
    const result = simulateSlot(
      requests.sort((x, y) => x.at - y.at).map((r, id) => ({ ...r, id })),
      config(),
      flexInferPolicy(),
    );
    const b = result.outcomes.find((o) => o.model === "b")!;
    expect(b).toMatchObject({ result: "refused", holdMs: 300_000, ended: 305_000 });
  });

  test("the tier ladder puts an idle resident to sleep after sleepAfter, which frees the slot", () => {
    const requests = [request(0, "a", 0), request(1, "b", 400_000)];
    const result = simulateSlot(requests, config(), flexInferPolicy());
    // a: ready at 2.25 s, done at 3.25 s, asleep 300 s later; b is then granted an empty slot.
    expect(result.transitions.map((t) => t.kind)).toEqual(["grant", "grant"]);
    expect(result.outcomes[1]!.holdMs).toBe(2_250);
    expect(result.residentMs.a).toBe(3_250 + 300_000 + 500);
  });

  test("a model outside the slot is served whatever the slot does", () => {
    const models = [member("a"), member("b"), member("solo", { inSlot: false, initialTier: "ready" })];
    const requests: TraceRequest[] = [];
    for (let i = 0; i < 60; i++) requests.push(request(requests.length, i % 2 ? "a" : "b", i * 7_000, 15));
    for (let i = 0; i < 60; i++) requests.push(request(requests.length, "solo", i * 5_000, 3));
    for (const policy of [arbiterPolicy("sticky"), arbiterPolicy("fifo"), flexInferPolicy()]) {
      const solo = simulateSlot(requests, config(models), policy).outcomes.filter((o) => o.model === "solo");
      expect(solo.every((o) => o.result === "served" && o.holdMs === 0)).toBe(true);
    }
  });

  test("one resident at a time, every request ends once, and the same inputs give the same run", () => {
    const requests: TraceRequest[] = [];
    for (let i = 0; i < 200; i++)
      requests.push(request(i, ["a", "b", "c"][(i * 7) % 3]!, i * 1_500, 1 + (i % 13)));
    const models = [
      member("a"),
      member("b", { initialTier: "cold" }),
      member("c", { initialTier: "asleep-2" }),
    ];
    for (const policy of ["sticky", "fifo", "priority"] as const) {
      const first = simulateSlot(requests, config(models), arbiterPolicy(policy));
      expect(first.violations).toEqual([]);
      expect(new Set(first.outcomes.map((o) => o.id)).size).toBe(requests.length);
      expect(simulateSlot(requests, config(models), arbiterPolicy(policy))).toEqual(first);
    }
  });
});
