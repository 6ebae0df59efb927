import { describe, expect, it } from "vitest";
import { repushDue, repushTickMs } from "./repush.ts";

const periods = { zeroRepushMs: 250, repushMs: 2_000 };
const atZero = { active: true, atZero: true, held: 0 };
const held = { active: true, atZero: false, held: 2 };

describe("when a stream says 'true' again", () => {
  it("ticks at the shorter period", () => {
    expect(repushTickMs(periods)).toBe(250);
    expect(repushTickMs({ zeroRepushMs: 300, repushMs: 100 })).toBe(100);
  });

  it("at zero, at every tick, even one a few milliseconds early (it waited for the next: 500 ms)", () => {
    // Measured with a grpc-js client before: gaps of 245-252 ms, and 499-500 ms now and then.
    for (const since of [245, 249, 250, 252, 499]) expect(repushDue(atZero, since, periods)).toBe(true);
    expect(repushDue(atZero, 100, periods)).toBe(false);
  });

  it("while held, at the tick nearest the period, not one tick later", () => {
    expect(repushDue(held, 1_750, periods)).toBe(false);
    expect(repushDue(held, 1_999, periods)).toBe(true);
    expect(repushDue(held, 2_001, periods)).toBe(true);
  });

  it("never for a Model that is not active, nor for one awake with nothing held", () => {
    expect(repushDue({ active: false, atZero: true, held: 0 }, 10_000, periods)).toBe(false);
    expect(repushDue({ active: true, atZero: false, held: 0 }, 10_000, periods)).toBe(false);
  });
});
