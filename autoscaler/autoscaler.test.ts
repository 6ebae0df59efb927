import { describe, expect, test } from "vitest";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { Harness } from "../test/support/autoscaler-harness.ts";
import type { FakeEngine } from "../test/support/fake-platform.ts";

const twoModels = (top = "", defaults = "") => `
${top}
defaults:
  sleepAfter: 1m
  deepSleepAfter: 1h
  zeroAfter: 2h
${defaults}
models:
  a:
    command: [engine, "\${PORT}"]
  b:
    command: [engine, "\${PORT}"]
`;

describe("host-memory budget", () => {
  const budget = twoModels("hostMemoryBudget: 15Gi", "  hostMemory: 10Gi");

  test("two level-1 sleepers over the budget: the longest asleep goes to level 2", async () => {
    const h = new Harness(budget, { autoUp: true });
    await h.serveCold("a");
    await h.advance(10_000);
    await h.serveCold("b");
    h.mark();
    await h.advance(50_000);
    // a alone fits.
    expect(h.tiers("a")).toEqual(["draining", "asleep-1"]);
    expect(h.platform.engineOf("a-1").calls).toEqual(["sleep(1,wait)"]);
    await h.advance(10_000);
    expect(h.platform.engineOf("a-1").calls).toEqual(["sleep(1,wait)", "wake(1)", "sleep(2,wait)"]);
    expect(h.platform.engineOf("b-2").calls).toEqual(["sleep(1,wait)"]);
    expect(h.tiers("a")).toEqual(["draining", "asleep-1", "asleep-2"]);
    expect(h.tiers("b")).toEqual(["draining", "asleep-1"]);
    expect(h.events.find((e) => e.tier === "asleep-2")?.since).toBe(h.clock.now());
  });

  test("a demotion this process cannot ask (out of file descriptors): the sleeper stays at level 1, and the budget asks again after the cool-down", async () => {
    const h = new Harness(budget, { autoUp: true });
    await h.serveCold("a");
    await h.advance(10_000);
    await h.serveCold("b");
    h.mark();
    await h.advance(50_000);
    const a = h.platform.engineOf("a-1");
    a.localFailNext("wake");
    await h.advance(10_000);
    // The wake never reached the engine: a sleeps on at level 1, kept, with no error.
    expect(a.calls).toEqual(["sleep(1,wait)", "wake(1)"]);
    expect(a.level).toBe(1);
    expect(h.tiers("a")).toEqual(["draining", "asleep-1"]);
    expect(h.platform.scales).toEqual([]);
    expect(h.controller("a").state().lastError).toBeUndefined();
    // deepSleepAfter (1h) is far: only the budget asks for the move again, once the cool-down is over.
    await h.advance(1_000);
    expect(a.calls).toEqual(["sleep(1,wait)", "wake(1)", "wake(1)", "sleep(2,wait)"]);
    expect(h.tiers("a")).toEqual(["draining", "asleep-1", "asleep-2"]);
    expect(h.tiers("b")).toEqual(["draining", "asleep-1"]);
    expect(h.platform.scales).toEqual([]);
  });

  test("the budget is per machine: sleepers on two nodes each fit", async () => {
    const h = new Harness(budget, { autoUp: true, node: (model) => `node-${model}` });
    await h.serveCold("a");
    await h.serveCold("b");
    h.mark();
    await h.advance(60_000);
    expect(h.tiers("a")).toEqual(["draining", "asleep-1"]);
    expect(h.tiers("b")).toEqual(["draining", "asleep-1"]);
    expect(h.platform.engineOf("a-1").calls).toEqual(["sleep(1,wait)"]);
    expect(h.platform.engineOf("b-2").calls).toEqual(["sleep(1,wait)"]);
  });
});

describe("CloudEvents", () => {
  test("a sink closed at shutdown, or replaced by a reload, is told why what it still holds is lost (found by an outside tester)", async () => {
    const h = new Harness(twoModels(), { direct: { sink: true } });
    const told: string[] = [];
    const sink = (name: string) => ({
      emit: () => {},
      drain: async () => {},
      close: async (why?: string) => void told.push(`${name}: ${why}`),
    });
    h.autoscaler.setSink(sink("before the reload"));
    h.autoscaler.setSink(sink("after the reload"));
    await h.autoscaler.close();
    expect(told).toEqual([
      "before the reload: the settings named another sink, and this one did not take them within the 2 s it was given",
      "after the reload: Snooze is stopping, and the sink did not take them within the 2 s the shutdown gives it",
    ]);
  });

  test("started, slept, woke, slept at level 2, stopped, and a failed activation, by type", async () => {
    const yaml = `
defaults:
  sleepAfter: 1m
  deepSleepAfter: 10m
  zeroAfter: 1h
models:
  m:
    command: [engine, "\${PORT}"]
`;
    const h = new Harness(yaml, { autoUp: true, direct: { sink: true }, answerErrors: true });
    await h.serveCold("m");
    await h.advance(60_000);
    h.demand("m");
    await h.settle();
    await h.request("m");
    await h.advance(60_000 + 10 * 60_000);
    h.platform.engineOf("m-1").failNext("wake", "boom");
    h.demand("m");
    await h.settle();
    await h.advance(60 * 60_000);
    expect(h.cloudEvents.map((e) => e.type)).toEqual([
      "dev.snooze.replica.started",
      "dev.snooze.replica.slept",
      "dev.snooze.replica.woke",
      "dev.snooze.replica.slept",
      "dev.snooze.replica.slept",
      "dev.snooze.activation.failed",
      "dev.snooze.replica.stopped",
    ]);
    expect(h.cloudEvents.every((e) => e.subject === "m")).toBe(true);
    const [started, slept, , , deeper, failed, stopped] = h.cloudEvents;
    expect(started!.data).toEqual({
      model: "m",
      replica: "m-1",
      from: "starting",
      to: "ready",
      address: "10.0.0.1:8000",
      // The fake platform starts at once on the manual clock.
      durationMs: 0,
    });
    expect(slept!.data).toMatchObject({ from: "draining", to: "asleep-1", level: 1 });
    // How long it was asleep at level 1 before it went deeper: the ladder's time, on the manual clock.
    expect(deeper!.data).toMatchObject({ from: "asleep-1", to: "asleep-2", level: 2 });
    expect(deeper!.data.durationMs).toBeGreaterThan(0);
    expect(failed!.data).toMatchObject({ from: "waking", to: "asleep-2", reason: "wake of m failed: boom" });
    expect(stopped!.data).toMatchObject({ from: "asleep-2", to: "cold" });
  });
});

describe("watchers and state", () => {
  test("a new watcher first hears every replica's tier now", async () => {
    const h = new Harness(twoModels(), { autoUp: true });
    await h.serveCold("a");
    await h.serveCold("b");
    await h.advance(60_000);
    h.demand("b");
    await h.settle();
    const seen: ReplicaEvent[] = [];
    const unwatch = h.autoscaler.watch((event) => seen.push(event));
    expect(seen.map((e) => [e.model, e.replica, e.tier])).toEqual([
      ["a", "a-1", "asleep-1"],
      ["b", "b-2", "ready"],
    ]);
    unwatch();
    h.demand("a");
    await h.settle();
    expect(seen).toHaveLength(2);
    expect(h.autoscaler.states().map((s) => [s.id, s.tier, s.replica])).toEqual([
      ["a", "ready", "a-1"],
      ["b", "ready", "b-2"],
    ]);
  });

  test("demand for a model no controller serves is refused", () => {
    const h = new Harness(twoModels());
    expect(h.autoscaler.demand("local", "nope")).toBe(false);
    expect(h.autoscaler.stats("local", "nope", { inFlight: 0, held: 0 })).toBe(false);
  });
});

describe("two models of one id (two Models on Kubernetes)", () => {
  test("the one that precedes (the oldest Model) gets the demand whatever order they were added in; the other when it goes", async () => {
    // Found by a probe: the first one added won, so a restarted autoscaler, listing the Models in
    // name order, woke another Model's pods than the one the activators held the requests for.
    const h = new Harness(twoModels(), { autoUp: true, direct: {} });
    const add = (name: string, created: string) => {
      h.platform.addModel(`ml/${name}`);
      const config = { ...h.config.models.get("a")!, id: "qwen" };
      h.autoscaler
        .addModel(
          { key: `ml/${name}`, config, minReplicas: 0, maxReplicas: 1, precedence: `${created} ml ${name}` },
          { holding: () => true },
        )
        .lead();
    };
    add("qwen-new", "2026-03-01T10:05:00Z");
    add("qwen-old", "2026-03-01T10:00:00Z");
    expect(h.autoscaler.servedInstead("ml/qwen-new")).toBe("ml/qwen-old");
    expect(h.autoscaler.servedInstead("ml/qwen-old")).toBeUndefined();
    h.demand("qwen");
    await h.settle();
    expect(h.platform.scales.map((s) => `${s.model} ${s.expected}->${s.to}`)).toEqual(["ml/qwen-old 0->1"]);
    h.autoscaler.removeModel("ml/qwen-old");
    expect(h.autoscaler.servedInstead("ml/qwen-new")).toBeUndefined();
    h.demand("qwen");
    await h.settle();
    expect(h.platform.scales.map((s) => `${s.model} ${s.expected}->${s.to}`)).toEqual([
      "ml/qwen-old 0->1",
      "ml/qwen-new 0->1",
    ]);
  });
});

describe("leadership", () => {
  test("a controller whose holding() is false does nothing; once it holds, demand acts", async () => {
    let holding = false;
    const h = new Harness(twoModels(), { autoUp: true, direct: { holding: () => holding } });
    h.demand("a");
    await h.advance(60_000);
    expect(h.platform.scales).toEqual([]);
    expect(h.platform.calls).toEqual([]);
    expect(h.events).toEqual([]);
    holding = true;
    h.demand("a");
    await h.settle();
    expect(h.platform.scales.map((s) => `${s.model} ${s.expected}->${s.to}`)).toEqual(["a 0->1"]);
    expect(h.controller("a").tier).toBe("ready");
  });

  test("leadership lost mid-wake: the operation writes nothing more; the next leader finds the engine awake", async () => {
    let holding = true;
    const h = new Harness(twoModels(), {
      autoUp: true,
      keepRecordedTiers: true,
      direct: { holding: () => holding },
    });
    await h.serveCold("a");
    await h.advance(60_000);
    h.mark();
    const engine = h.platform.engineOf("a-1");
    const wake = engine.hold("wake");
    h.demand("a");
    await h.settle();
    expect(h.tiers("a")).toEqual(["waking"]);
    holding = false;
    wake.release();
    await h.advance(60_000);
    // The engine woke (and the wake's own warm-up ran), but the old leader wrote nothing more.
    expect(engine.calls).toEqual(["wake(1)", "warmup"]);
    expect(h.tiers("a")).toEqual(["waking"]);
    expect(h.platform.tierRecords.map((r) => r.tier)).toEqual(["waking"]);

    // A new leadership (as on Kubernetes, after the Lease is won again) starts from the record.
    const controller = h.controller("a");
    controller.standDown();
    holding = true;
    controller.lead();
    await h.settle();
    expect(engine.calls).toEqual(["wake(1)", "warmup", "healthy", "isSleeping", "warmup"]);
    expect(h.tiers("a")).toEqual(["waking", "waking", "ready"]);
    expect(controller.tier).toBe("ready");
  });

  test("leadership lost mid-wake, and the next leader cannot make the warm-up (out of file descriptors): the engine, awake, is ready without it, not left waking", async () => {
    const { h, engine, controller } = await nextLeaderFindsWaking((engine) => engine.localFailNext("warmup"));
    expect(engine.calls).toEqual(["wake(1)", "warmup", "healthy", "isSleeping", "warmup"]);
    expect(h.tiers("a")).toEqual(["waking", "waking", "ready"]);
    expect(controller.tier).toBe("ready");
    expect(h.platform.scales).toEqual([]);
  });

  test("leadership lost mid-wake, and the engine answers the next leader's warm-up 401 (vLLM --api-key): ready without it, not stopped", async () => {
    const { h, engine, controller } = await nextLeaderFindsWaking((engine) =>
      engine.unauthorizedNext("warmup"),
    );
    expect(engine.calls).toEqual(["wake(1)", "warmup", "healthy", "isSleeping", "warmup"]);
    expect(h.tiers("a")).toEqual(["waking", "waking", "ready"]);
    expect(controller.tier).toBe("ready");
    expect(h.platform.scales).toEqual([]);
  });

  test("leadership lost mid-wake, and the engine fails the next leader's warm-up: stopped, not left waking for good; the next request starts a clean one", async () => {
    const { h, engine, controller } = await nextLeaderFindsWaking((engine) =>
      engine.failNext("warmup", "the warm-up did not return a completion"),
    );
    expect(engine.calls).toEqual(["wake(1)", "warmup", "healthy", "isSleeping", "warmup"]);
    // The request held since the wake gets a clean engine.
    expect(h.platform.scales.map((s) => `${s.expected}->${s.to} ${s.remove.join(",")}`)).toEqual([
      "1->0 a-1",
      "0->1 ",
    ]);
    expect(h.tiers("a", "a-1")).toEqual(["waking", "waking", "cold"]);
    expect(h.tiers("a", "a-2")).toEqual(["starting", "ready"]);
    expect(controller.tier).toBe("ready");
  });

  test("a new leader adopts recorded tiers without touching the engines", async () => {
    const h = new Harness(twoModels(), { autoUp: true, keepRecordedTiers: true });
    await h.serveCold("a");
    await h.serveCold("b");
    await h.advance(60_000);
    h.demand("b");
    await h.settle();
    await h.request("b");
    h.mark();
    for (const c of h.autoscaler.controllers) c.standDown();
    for (const c of h.autoscaler.controllers) c.lead();
    await h.settle();
    expect(h.platform.calls).toEqual([]);
    expect(h.events.map((e) => [e.replica, e.tier])).toEqual([
      ["a-1", "asleep-1"],
      ["b-2", "ready"],
    ]);
    // The ladder goes on from the recorded moments: a is still due for level 2 at asleep + 1h.
    h.mark();
    await h.advance(60 * 60_000);
    expect(h.platform.engineOf("a-1").calls).toEqual(["wake(1)", "sleep(2,wait)"]);
  });
});

describe("a new leader asks the engine where it is", () => {
  test("recorded waking by a leader that died before the wake, the engine at level 1: adopted as asleep-1, woken from level 1", async () => {
    const h = new Harness(twoModels(), { autoUp: true, keepRecordedTiers: true });
    await h.serveCold("a");
    await h.advance(60_000);
    const replica = h.platform.replica("a-1")!;
    expect(h.platform.engineOf("a-1").level).toBe(1);
    // The predecessor wrote "waking" and died before it sent the wake.
    await h.platform.recordTier("a", replica, { tier: "waking", since: h.clock.now() });
    for (const c of h.autoscaler.controllers) c.standDown();
    h.mark();
    for (const c of h.autoscaler.controllers) c.lead();
    await h.settle();
    expect(h.autoscaler.controller("a")!.tier).toBe("asleep-1");
    h.mark();
    h.demand("a");
    await h.settle();
    expect(h.platform.engineOf("a-1").calls).toContain("wake(1)");
    expect(h.platform.engineOf("a-1").calls).not.toContain("wake(2)");
  });
});

describe("Kubernetes-shaped timing (several activators, a drain grace)", () => {
  const yaml = `
defaults:
  sleepAfter: 1m
models:
  m:
    command: [engine, "\${PORT}"]
`;

  test("an activator that stops reporting no longer counts after activatorExpiryMs", async () => {
    const h = new Harness(yaml, { autoUp: true, direct: { activatorExpiryMs: 5_000 } });
    await h.serveCold("m");
    h.mark();
    // Another activator reports a request in flight, then is gone (its pod was deleted).
    h.stats("m", 1, 0, "activator-2");
    await h.advance(60_000 - 1);
    expect(h.events).toEqual([]);
    await h.advance(1);
    expect(h.tiers("m")).toEqual(["draining", "asleep-1"]);
  });

  test("the drain grace lets activators see draining before the engine is checked, whatever reports arrive", async () => {
    const h = new Harness(yaml, { autoUp: true, direct: { drainGraceMs: 1_000 } });
    const id = await h.serveCold("m");
    const engine = h.platform.engineOf(id);
    h.mark();
    await h.advance(60_000);
    expect(h.tiers("m")).toEqual(["draining"]);
    expect(engine.loads).toBe(0);
    // The activators keep reporting (every second on Kubernetes), not yet having seen the drain.
    await h.advance(100);
    h.stats("m", 0, 0);
    await h.settle();
    expect(engine.loads).toBe(0);
    expect(engine.calls).toEqual([]);
    await h.advance(900);
    expect(engine.loads).toBeGreaterThan(0);
    expect(engine.calls).toEqual(["sleep(1,wait)"]);
  });
});

/**
 * Leadership lost while model a's engine wakes: the old leader's wake and warm-up ran, but it wrote
 * nothing more (the record says waking); `fault` is set on the engine, then a new leader takes over.
 */
async function nextLeaderFindsWaking(fault: (engine: FakeEngine) => void) {
  let holding = true;
  const h = new Harness(twoModels(), {
    autoUp: true,
    keepRecordedTiers: true,
    direct: { holding: () => holding },
  });
  await h.serveCold("a");
  await h.advance(60_000);
  h.mark();
  const engine = h.platform.engineOf("a-1");
  const wake = engine.hold("wake");
  h.demand("a");
  await h.settle();
  holding = false;
  wake.release();
  await h.advance(60_000);
  expect(h.tiers("a")).toEqual(["waking"]);
  const controller = h.controller("a");
  controller.standDown();
  holding = true;
  fault(engine);
  controller.lead();
  await h.settle();
  return { h, engine, controller };
}
