import { describe, expect, test, vi } from "vitest";
import { Harness, type HarnessOptions } from "../test/support/autoscaler-harness.ts";

// The activator reports every model's load every second; an idle one's reports repeat (issue 14).
const oneModel = (extra = "") => `
defaults:
  sleepAfter: 1m
  deepSleepAfter: 10m
  zeroAfter: 1h
  startTimeout: 2m
${extra}
models:
  m:
    command: [engine, "\${PORT}"]
`;

async function readyModel(yaml = oneModel(), options: HarnessOptions = {}) {
  const h = new Harness(yaml, options);
  await h.serveCold("m");
  h.mark();
  return h;
}

/** Every look of the controller at the platform: each decision pass takes one or more. */
function passes(h: Harness) {
  return vi.spyOn(h.platform, "replicaSet");
}

/** Each event as [tier, ms since `start`], over `ms` on the clock, with or without idle reports each second. */
async function timeline(h: Harness, ms: number, reportEverySecond: boolean) {
  const start = h.clock.now();
  for (let t = 0; t < ms; t += 1_000) {
    if (reportEverySecond) h.stats("m", 0, 0);
    await h.advance(1_000);
  }
  return h.events.map((e) => [e.tier, e.since - start]);
}

describe("a repeated idle report runs no decision pass", () => {
  test("a ready model's identical idle reports for 30 s: the controller does not look", async () => {
    const h = await readyModel();
    const looks = passes(h);
    for (let i = 0; i < 30; i++) {
      h.stats("m", 0, 0);
      await h.advance(1_000);
    }
    expect(looks).not.toHaveBeenCalled();
  });

  test("a cold model: its first report is looked at, the identical ones after it are not", async () => {
    const h = new Harness(oneModel());
    await h.settle();
    const looks = passes(h);
    h.stats("m", 0, 0);
    await h.settle();
    const first = looks.mock.calls.length;
    expect(first).toBeGreaterThan(0);
    for (let i = 0; i < 30; i++) {
      h.stats("m", 0, 0);
      await h.advance(1_000);
    }
    expect(looks).toHaveBeenCalledTimes(first);
  });

  test("requests one at a time after a pass that saw the model idle: no pass, and sleep comes on time", async () => {
    // Busy and idle twice a request: the timer armed for the idle load comes first whatever they say.
    const h = await readyModel();
    h.stats("m", 0, 0);
    await h.settle();
    const looks = passes(h);
    for (let i = 0; i < 1_000; i++) {
      h.stats("m", 1, 0);
      h.stats("m", 0, 0);
      await h.advance(10);
    }
    expect(looks).not.toHaveBeenCalled();
    const ended = h.clock.now() - 10;
    await h.advance(60_000 - 10 - 1);
    expect(h.events).toEqual([]);
    await h.advance(1);
    expect(h.tiers("m")).toEqual(["draining", "asleep-1"]);
    expect(h.events[0]?.since).toBe(ended + 60_000);
  });

  test("after a pass that saw requests in flight, a busy report and the one that says the work ended are looked at", async () => {
    const h = await readyModel();
    // Another activator's first report is always looked at: that pass sees a request in flight.
    h.stats("m", 1, 0, "b");
    await h.settle();
    const looks = passes(h);
    h.stats("m", 1, 0, "b");
    await h.settle();
    const busy = looks.mock.calls.length;
    expect(busy).toBeGreaterThan(0);
    h.stats("m", 0, 0, "b");
    await h.settle();
    expect(looks.mock.calls.length).toBeGreaterThan(busy);
  });

  test("a report with requests held is looked at, whatever the last pass saw", async () => {
    const h = await readyModel();
    h.stats("m", 0, 0);
    await h.settle();
    const looks = passes(h);
    h.stats("m", 1, 1);
    await h.settle();
    expect(looks).toHaveBeenCalled();
  });

  test("a model that learns (prewarmBudget) is looked at on every report: its plans move with time", async () => {
    const h = await readyModel(oneModel("  prewarmBudget: 10m"));
    h.stats("m", 0, 0);
    await h.settle();
    const looks = passes(h);
    h.stats("m", 0, 0);
    await h.settle();
    expect(looks).toHaveBeenCalled();
  });
});

describe("the ladder decides on time as without the reports", () => {
  test("sleepAfter, deepSleepAfter and zeroAfter: the same moments with an idle report every second", async () => {
    const span = 60_000 + 60 * 60_000 + 5_000;
    const quiet = await timeline(await readyModel(), span, false);
    const reported = await timeline(await readyModel(), span, true);
    expect(quiet.map(([tier]) => tier)).toEqual(["draining", "asleep-1", "asleep-2", "cold"]);
    expect(quiet.map(([, since]) => since)).toEqual([60_000, 60_000, 660_000, 3_660_000]);
    expect(reported).toEqual(quiet);
  });

  test("the idle clock starts at the report that says the work ended, whatever follows it", async () => {
    const h = await readyModel();
    h.stats("m", 1, 0);
    await h.advance(10_000);
    const ended = h.clock.now();
    for (let i = 0; i < 59; i++) {
      h.stats("m", 0, 0);
      await h.advance(1_000);
    }
    h.stats("m", 0, 0);
    await h.advance(1_000 - 1);
    expect(h.events).toEqual([]);
    await h.advance(1);
    expect(h.tiers("m")).toEqual(["draining", "asleep-1"]);
    expect(h.events[0]?.since).toBe(ended + 60_000);
  });

  test("an activator that stops reporting counts until its expiry, while another keeps reporting idle", async () => {
    const expiry = 120_000;
    const run = async (otherReports: boolean) => {
      const h = await readyModel(oneModel(), { direct: { activatorExpiryMs: expiry } });
      const start = h.clock.now();
      // Activator b reports one request in flight once and is never heard of again.
      h.stats("m", 1, 0, "b");
      await h.settle();
      for (let i = 0; i < 180; i++) {
        if (otherReports) h.stats("m", 0, 0);
        await h.advance(1_000);
      }
      return h.events.map((e) => [e.tier, e.since - start]);
    };
    const quiet = await run(false);
    expect(quiet).toEqual([
      ["draining", expiry + 1],
      ["asleep-1", expiry + 1],
    ]);
    expect(await run(true)).toEqual(quiet);
  });

  test("a pass that could not act (its Lease not held) leaves the next idle report to decide", async () => {
    let holding = true;
    const h = await readyModel(oneModel(), { direct: { holding: () => holding } });
    holding = false;
    // sleepAfter comes while the Lease is not held: that pass acts on nothing and arms no timer.
    for (let i = 0; i < 70; i++) {
      h.stats("m", 0, 0);
      await h.advance(1_000);
    }
    expect(h.events).toEqual([]);
    holding = true;
    h.stats("m", 0, 0);
    await h.settle();
    expect(h.tiers("m")).toEqual(["draining", "asleep-1"]);
  });
});

describe("an operation cut short by a moment without the Lease", () => {
  test("a wake cut by a lapse of the Lease's renewal is found out again, not left waking for good", async () => {
    // Found by the API server outage e2e test: the wake's "waking" write waited for a paused API
    // server, the Lease's renewal lapsed meanwhile, and the wake gave up at its next leadership
    // check though this replica went on leading: the engine woke, the replica stayed `waking`.
    let holding = true;
    const h = await readyModel(oneModel(), { direct: { holding: () => holding } });
    const engine = h.platform.engineOf("m-1");
    await h.advance(60_000);
    await h.settle();
    expect(h.tiers("m")).toEqual(["draining", "asleep-1"]);
    const wake = engine.hold("wake");
    h.demand("m");
    await h.settle();
    expect(h.tiers("m").at(-1)).toBe("waking");
    holding = false;
    wake.release();
    await h.settle();
    expect(h.tiers("m").at(-1)).toBe("waking");
    // The renewal goes through again: the next report's pass finds the engine awake and routes it.
    holding = true;
    h.stats("m", 0, 1);
    await h.settle();
    expect(h.tiers("m").at(-1)).toBe("ready");
  });
});
