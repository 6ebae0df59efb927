import { describe, expect, test } from "vitest";
import { Harness } from "../test/support/autoscaler-harness.ts";
import { missingWorkloadGraceMs } from "./model-controller.ts";
import { modelStatus } from "./model-status.ts";

// A Model whose workloadRef names a Deployment that does not exist: the platform has no replica set
// for it and says why. Every time on the manual clock.
const yaml = `
models:
  m:
    command: [engine, "\${PORT}"]
    holdBudget: 5m
`;
const reason = 'start of m failed: Deployment "m" does not exist';

/** The status the autoscaler would write for `m` now. */
const statusOf = (h: Harness) => modelStatus({ ...h.controller("m").observation(), selector: "" });
const ready = (h: Harness) => statusOf(h).conditions?.find((c) => c.type === "Ready");

describe("a model whose workload is missing", () => {
  test("its status says so at once, with no request: Ready is False for WorkloadNotFound, not 'no replicas'", async () => {
    const h = new Harness(yaml);
    h.platform.removeWorkload("m");
    await h.settle();
    expect(statusOf(h).phase).toBe("Cold");
    expect(ready(h)).toMatchObject({
      status: "False",
      reason: "WorkloadNotFound",
      message: 'Deployment "m" does not exist',
    });
    expect(h.events).toEqual([]);
  });

  test("a held request hears why after the grace (a cache catching up), not at the end of its hold budget", async () => {
    const h = new Harness(yaml, { answerErrors: true });
    h.platform.removeWorkload("m");
    await h.settle();
    h.demand("m");
    await h.advance(missingWorkloadGraceMs - 1);
    expect(h.events).toEqual([]);
    await h.advance(1);
    expect(h.events.map((e) => [e.tier, e.error])).toEqual([["cold", reason]]);
    expect(statusOf(h).phase).toBe("Failed");
    expect(ready(h)).toMatchObject({ reason: "WorkloadNotFound" });
    expect(statusOf(h).conditions?.find((c) => c.type === "ActivationFailed")).toMatchObject({
      status: "True",
      message: reason,
    });
    // Nothing was scaled: there is nothing to scale.
    expect(h.platform.scales).toEqual([]);
  });

  test("while it stays missing, a failure comes at most once per grace however often requests come", async () => {
    const h = new Harness(yaml, { answerErrors: true });
    h.platform.removeWorkload("m");
    await h.settle();
    h.demand("m");
    await h.advance(missingWorkloadGraceMs);
    expect(h.events).toHaveLength(1);
    // The activators have not reported the answered request yet: still held, and asked again.
    for (let i = 0; i < 10; i++) {
      h.demand("m");
      await h.advance(100);
    }
    expect(h.events).toHaveLength(1);
    await h.advance(missingWorkloadGraceMs - 1_000);
    expect(h.events.map((e) => e.error)).toEqual([reason, reason]);
  });

  test("the workload created: the failures no longer hold starts back, and the next request starts it at once", async () => {
    const h = new Harness(yaml, { answerErrors: true });
    h.platform.removeWorkload("m");
    await h.settle();
    for (let i = 0; i < 3; i++) {
      h.demand("m");
      await h.advance(missingWorkloadGraceMs);
    }
    expect(h.controller("m").state()).toMatchObject({ lastError: reason });
    h.platform.restoreWorkload("m");
    await h.settle();
    expect(h.controller("m").state().lastError).toBeUndefined();
    expect(ready(h)).toMatchObject({ reason: "ScaledToZero" });
    h.demand("m");
    await h.settle();
    expect(h.platform.scales).toEqual([{ model: "m", expected: 0, to: 1, remove: [], outcome: "ok" }]);
  });

  test("a person's wake is answered with the reason too, not at its timeout", async () => {
    const h = new Harness(yaml);
    h.platform.removeWorkload("m");
    await h.settle();
    let settled = false;
    void h
      .controller("m")
      .wakeNow(60_000)
      .then(() => {
        settled = true;
      });
    await h.advance(missingWorkloadGraceMs);
    expect(settled).toBe(true);
    expect(h.controller("m").state().lastError).toBe(reason);
  });
});
