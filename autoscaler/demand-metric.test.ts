import { describe, expect, test } from "vitest";
import { ManualClock } from "../test/support/manual-clock.ts";
import { type DemandInput, demandOf, type FlowReport, rateWindowMs, trimReports } from "./demand-metric.ts";

/** One activator's stats reports every second, as the autoscaler keeps them. */
class Activator {
  arrived = 0;
  completed = 0;
  serviceMs = 0;
  inFlight = 0;
  held = 0;
  reports: FlowReport[] = [];
  private readonly clock: ManualClock;
  constructor(clock: ManualClock) {
    this.clock = clock;
  }
  report() {
    const now = this.clock.now();
    const { arrived, completed, serviceMs, inFlight, held } = this;
    this.reports = trimReports(
      [...this.reports, { at: now, arrived, completed, serviceMs, inFlight, held }],
      now,
    );
  }
}

const input = (a: Activator, clock: ManualClock, rest: Partial<DemandInput>): DemandInput => ({
  inFlight: a.inFlight,
  held: a.held,
  reports: [a.reports],
  ready: 1,
  warming: 0,
  concurrency: 2,
  startMs: 12_000,
  now: clock.now(),
  ...rest,
});
/** What an HPA with an AverageValue target of 2 proposes: ceil(metric / target). */
const hpa = (demand: number) => Math.ceil(demand / 2);

describe("demandOf", () => {
  test("open-loop step while new replicas warm: the arrival rate's need, not the pile held for them", () => {
    const clock = new ManualClock();
    const a = new Activator(clock);
    // 1.5 requests/s of 1 s each on one replica (concurrency 2) for 10 s.
    for (let t = 0; t < 10; t++) {
      clock.advance(1_000);
      a.arrived += 1.5;
      a.completed += 1.5;
      a.serviceMs += 1_500;
      a.inFlight = 1;
      a.report();
    }
    a.arrived = Math.round(a.arrived);
    a.completed = Math.round(a.completed);
    expect(demandOf(input(a, clock, {}))).toMatchObject({
      basis: "rate",
      arrivalRate: 1.5,
      serviceMs: 1_000,
    });
    expect(hpa(demandOf(input(a, clock, {})).demand)).toBe(1);

    // ×4: 6/s. The ready replica serves 2/s; 4/s pile up while 3 new replicas warm for 12 s.
    const seen: { held: number; demand: number }[] = [];
    for (let t = 0; t < 12; t++) {
      clock.advance(1_000);
      a.arrived += 6;
      a.completed += 2;
      a.serviceMs += 2_000;
      a.inFlight = 2;
      a.held += 4;
      a.report();
      seen.push({ held: a.held, demand: demandOf(input(a, clock, { warming: 3 })).demand });
    }
    const last = demandOf(input(a, clock, { warming: 3 }));
    expect(last).toMatchObject({ basis: "rate", arrivalRate: 6, serviceMs: 1_000, backlog: 48 - 6 });
    // 6 for the arrivals, plus the backlog the warming replicas will not take (42) over a start (12 s).
    expect(last.demand).toBeCloseTo(6 + 42 / 12, 2);
    // held + in-flight would have had the HPA ask for 25 replicas; this asks for 5.
    expect(hpa(a.held + a.inFlight)).toBe(25);
    expect(hpa(last.demand)).toBe(5);
    // It moves with the arrivals, not with the pile: the 4 replicas asked for (1 ready + 3
    // warming, the capacity requests fill) until the backlog over a start adds a fifth.
    expect(seen.map((s) => hpa(s.demand))).toEqual([3, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5]);
  });

  test("a closed loop (6 clients waiting for their answers) on one replica: its own arrival rate is capped, the held clients still grow it", () => {
    const clock = new ManualClock();
    const a = new Activator(clock);
    // 2 in flight of 3 s each, 4 held: 2 answers every 3 s, each client sends again at once.
    for (let t = 1; t <= 9; t++) {
      clock.advance(1_000);
      if (t % 3 === 0) {
        a.arrived += 2;
        a.completed += 2;
        a.serviceMs += 6_000;
      }
      a.inFlight = 2;
      a.held = 4;
      a.report();
    }
    // Rate × service time is 2 (what one replica serves): the 4 held clients over a start of 3 s ask for the rest.
    const one = demandOf(input(a, clock, { startMs: 3_000 }));
    expect(one.basis).toBe("rate");
    expect(one.demand).toBe(6);
    expect(hpa(one.demand)).toBe(3);
    // While the 2 new replicas warm, they take the 4 held at once: the demand keeps what was asked for.
    expect(demandOf(input(a, clock, { startMs: 3_000, warming: 2 })).demand).toBe(6);
  });

  test("never more than the requests present at once: a burst of arrivals is not a rate", () => {
    const clock = new ManualClock();
    const a = new Activator(clock);
    a.arrived = 10;
    a.completed = 10;
    a.serviceMs = 30_000;
    a.report();
    clock.advance(1_000);
    // 6 arrive in the same second: 6/s × 3 s would say 18.
    a.arrived += 6;
    a.inFlight = 2;
    a.held = 4;
    a.report();
    const estimate = demandOf(input(a, clock, { startMs: 3_000 }));
    expect(estimate.arrivalRate).toBe(6);
    expect(estimate.demand).toBe(6);
  });

  test("no service time known yet: in-flight + the held requests warming replicas will not take", () => {
    const clock = new ManualClock();
    const a = new Activator(clock);
    a.arrived = 5;
    a.held = 5;
    a.report();
    clock.advance(1_000);
    a.report();
    // At KEDA's zero, nothing awake or warming: all 5 held.
    expect(demandOf(input(a, clock, { ready: 0 }))).toMatchObject({ basis: "held", demand: 5, backlog: 5 });
    // One replica warming takes 2 of them at once: 3 more wanted, and the 2 warming kept.
    expect(demandOf(input(a, clock, { ready: 0, warming: 1 }))).toMatchObject({
      basis: "held",
      demand: 3,
      backlog: 3,
    });
    // Three warming take them all: the demand is the capacity they fill, not 0.
    expect(demandOf(input(a, clock, { ready: 0, warming: 3 }))).toMatchObject({ demand: 5, backlog: 0 });
    // No reports at all (an activator of an older version): the same.
    expect(demandOf({ ...input(a, clock, { ready: 0 }), reports: [] })).toMatchObject({
      basis: "held",
      demand: 5,
    });
  });

  test("idle: 0; the rate fades out of the window once the arrivals stop", () => {
    const clock = new ManualClock();
    const a = new Activator(clock);
    for (let t = 0; t < 5; t++) {
      clock.advance(1_000);
      a.arrived += 2;
      a.completed += 2;
      a.serviceMs += 2_000;
      a.inFlight = 2;
      a.report();
    }
    expect(demandOf(input(a, clock, {})).demand).toBe(2);
    a.inFlight = 0;
    for (let t = 0; t < rateWindowMs / 1_000 + 1; t++) {
      clock.advance(1_000);
      a.report();
    }
    expect(demandOf(input(a, clock, {}))).toMatchObject({ basis: "rate", arrivalRate: 0, demand: 0 });
    // The service time stays known (all answers since the activator started).
    expect(demandOf(input(a, clock, {})).serviceMs).toBe(1_000);
  });

  test("an activator that restarted under the same name: its totals start again, the reports before are dropped", () => {
    const clock = new ManualClock();
    const a = new Activator(clock);
    a.arrived = 100;
    a.completed = 100;
    a.serviceMs = 100_000;
    a.report();
    clock.advance(1_000);
    a.arrived = 3;
    a.completed = 3;
    a.serviceMs = 6_000;
    a.report();
    expect(a.reports).toHaveLength(1);
    // One report since the restart: no rate yet, the held basis.
    expect(demandOf(input(a, clock, {}))).toMatchObject({ basis: "held", serviceMs: 2_000 });
  });

  test("rates add up over activators; unlimited concurrency lets one warming replica take every held request", () => {
    const clock = new ManualClock();
    const [a, b] = [new Activator(clock), new Activator(clock)];
    for (let t = 0; t < 3; t++) {
      clock.advance(1_000);
      for (const x of [a, b]) {
        x.arrived += 2;
        x.completed += 2;
        x.serviceMs += 1_000;
        x.inFlight = 1;
        x.report();
      }
    }
    b.held = 7;
    const both = demandOf({ ...input(a, clock, {}), held: 7, inFlight: 2, reports: [a.reports, b.reports] });
    expect(both).toMatchObject({ arrivalRate: 4, serviceMs: 500 });
    const unlimited = demandOf({
      ...input(a, clock, { concurrency: undefined, warming: 1 }),
      held: 7,
      reports: [a.reports, b.reports],
    });
    expect(unlimited.backlog).toBe(0);
  });
});
