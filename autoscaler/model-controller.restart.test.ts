import { describe, expect, test } from "vitest";
import { Harness } from "../test/support/autoscaler-harness.ts";

// A replica whose engine settings changed (a config reload's new command) is replaced: drained and
// stopped whatever the load, then started anew; all on the manual clock over the fake platform.

const yaml = `
defaults:
  sleepAfter: 1m
  drainTimeout: 30s
models:
  m:
    command: [engine, "\${PORT}"]
`;

async function readyModel() {
  const h = new Harness(yaml);
  const id = await h.serveCold("m");
  h.mark();
  return { h, id, engine: h.platform.engineOf(id) };
}

describe("an outdated replica", () => {
  test("ready with a request in flight and one held: drains (never taken back), stops, and a new one starts", async () => {
    const { h, id, engine } = await readyModel();
    h.stats("m", 1, 0);
    engine.running = 1;
    await h.settle();
    h.platform.outdate("m");
    await h.settle();
    expect(h.tiers("m", id)).toEqual(["draining"]);
    // A request arrives while it drains: held, and it does not take the old engine back.
    h.stats("m", 1, 1);
    h.demand("m");
    await h.advance(5_000);
    expect(h.tiers("m", id)).toEqual(["draining"]);
    expect(h.platform.calls).toEqual([]);
    // The request in flight finishes: the old engine stops, a new one starts for the held request.
    engine.running = 0;
    h.stats("m", 0, 1);
    await h.advance(1_000);
    expect(h.tiers("m", id)).toEqual(["draining", "cold"]);
    expect(h.platform.calls).toEqual([`scale m 1->0 -${id}`, "scale m 0->1"]);
    const [next] = h.platform.ids("m");
    expect(next).not.toBe(id);
    expect(h.platform.replica(next!)!.outdated).toBeUndefined();
    h.platform.bringUp(next!);
    await h.settle();
    expect(h.controller("m").tier).toBe("ready");
  });

  test("drained past drainTimeout, it stops anyway", async () => {
    const { h, id, engine } = await readyModel();
    engine.running = 1;
    h.stats("m", 1, 0);
    h.platform.outdate("m");
    await h.advance(29_000);
    expect(h.platform.ids("m")).toEqual([id]);
    await h.advance(2_000);
    expect(h.platform.calls[0]).toBe(`scale m 1->0 -${id}`);
  });

  test("asleep: stopped at once, not woken; the next request starts the new engine", async () => {
    const { h, id } = await readyModel();
    await h.advance(61_000);
    expect(h.controller("m").tier).toBe("asleep-1");
    h.mark();
    h.platform.outdate("m");
    await h.settle();
    expect(h.platform.calls).toEqual([`scale m 1->0 -${id}`]);
    expect(h.platform.engineOf(id).calls.some((c) => c.startsWith("wake"))).toBe(false);
    h.demand("m");
    await h.settle();
    expect(h.platform.calls.at(-1)).toBe("scale m 0->1");
  });

  test("not outdated: the same load leaves the ready replica alone", async () => {
    const { h, id, engine } = await readyModel();
    engine.running = 1;
    h.stats("m", 1, 1);
    await h.advance(10_000);
    expect(h.tiers("m", id)).toEqual([]);
    expect(h.platform.calls).toEqual([]);
  });
});
