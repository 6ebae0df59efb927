import { describe, expect, it } from "vitest";
import { RepeatGate } from "./repeat-gate.ts";

describe("a line said once, then at most once a period", () => {
  it("says a key at once, counts its repeats within the period, and says it again after with the count", () => {
    const gate = new RepeatGate({ everyMs: 60_000, maxKeys: 10 });
    expect(gate.pass("a", 0)).toEqual({ repeated: 0 });
    expect(gate.pass("a", 1_000)).toBeUndefined();
    expect(gate.pass("a", 59_999)).toBeUndefined();
    // Another key is its own.
    expect(gate.pass("b", 2_000)).toEqual({ repeated: 0 });
    expect(gate.pass("a", 60_000)).toEqual({ repeated: 2 });
    expect(gate.pass("a", 60_001)).toBeUndefined();
    expect(gate.pass("a", 200_000)).toEqual({ repeated: 1 });
  });

  it("holds at most maxKeys: the ones older than the period go first, and past that a new key is only counted", () => {
    const gate = new RepeatGate({ everyMs: 1_000, maxKeys: 3 });
    for (const key of ["a", "b", "c"]) expect(gate.pass(key, 0)).toEqual({ repeated: 0 });
    // Full of recent keys: a flood of new ones (a client inventing names) is not said.
    expect(gate.pass("d", 10)).toBeUndefined();
    expect(gate.size).toBe(3);
    // Once they are older than the period, they make room.
    expect(gate.pass("d", 1_000)).toEqual({ repeated: 0, unsaid: 1 });
    expect(gate.size).toBeLessThanOrEqual(3);
  });
});
