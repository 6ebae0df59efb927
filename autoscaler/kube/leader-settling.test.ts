import { afterEach, describe, expect, test, vi } from "vitest";
import { LeaderSettling } from "./leader-settling.ts";

describe("LeaderSettling", () => {
  afterEach(() => vi.restoreAllMocks());

  test("settling from the lead until the first stats, or settleMs at most", () => {
    let now = 1_000;
    const s = new LeaderSettling(2_000, () => now);
    expect(s.settling("ns/m")).toBe(false);
    s.led("ns/m");
    expect(s.settling("ns/m")).toBe(true);
    now += 500;
    s.reported("ns/m");
    expect(s.settling("ns/m")).toBe(false);
    s.led("ns/m");
    now += 2_000;
    expect(s.settling("ns/m")).toBe(false);
    s.forget("ns/m");
    expect(s.settling("ns/m")).toBe(false);
  });

  test("a system clock set an hour back after the lead: the next stats end the settling", () => {
    // Before, both times were Date.now(): a report after the step looked older than the lead, and
    // the leader said it was settling (KEDA's metrics UNAVAILABLE) for the hour.
    let wall = Date.UTC(2026, 11, 7, 2);
    vi.spyOn(Date, "now").mockImplementation(() => wall);
    const s = new LeaderSettling(2_000);
    s.led("ns/m");
    wall -= 3_600_000;
    s.reported("ns/m");
    expect(s.settling("ns/m")).toBe(false);
  });
});
