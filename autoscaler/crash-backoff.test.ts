import { describe, expect, it } from "vitest";
import { backoffMs, crashLoopError, crashWindowMs, withCrash } from "./crash-backoff.ts";

describe("crash back-off", () => {
  it("starts at the second failure, 1 s doubling up to a minute", () => {
    expect([0, 1, 2, 3, 4, 8, 20].map((failures) => backoffMs(failures, [], 0))).toEqual([
      0, 0, 1_000, 2_000, 4_000, 60_000, 60_000,
    ]);
  });

  it("counts crashes within the window with the failed activations, and forgets older ones", () => {
    const now = 10 * 60_000;
    const crashes = [now - crashWindowMs - 1, now - crashWindowMs + 1, now - 1];
    expect(backoffMs(0, crashes, now)).toBe(1_000);
    expect(backoffMs(1, crashes, now)).toBe(2_000);
    expect(withCrash(crashes, now)).toEqual([now - crashWindowMs + 1, now - 1, now]);
  });

  it("says why, how often and how long in the model's lastError", () => {
    expect(crashLoopError("engine exited (code 1)", 3, 2_000)).toMatch(
      /^engine exited \(code 1\); its engine left on its own 3 times within .*, so its restarts back off \(.*after this one\)$/,
    );
  });
});
