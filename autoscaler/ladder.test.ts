import { describe, expect, test } from "vitest";
import { decideTier, type LadderInput, type LadderSettings } from "./ladder.ts";

const settings: LadderSettings = {
  sleep: true,
  sleepAfter: 60_000,
  sleepLevel: 1,
  deepSleepAfter: 600_000,
  zeroAfter: 3_600_000,
};
const base: LadderInput = {
  tier: "ready",
  since: 0,
  asleepSince: 0,
  inFlight: 0,
  held: 0,
  lastActive: 0,
  now: 0,
  backoffUntil: 0,
};
const at = (patch: Partial<LadderInput>, s: Partial<LadderSettings> = {}) =>
  decideTier({ ...base, ...patch }, { ...settings, ...s });

describe("decideTier", () => {
  test("held requests start a cold replica and wake a sleeping one", () => {
    expect(at({ tier: "cold", held: 1 })).toEqual({ kind: "start" });
    expect(at({ tier: "asleep-1", held: 1 })).toEqual({ kind: "wake" });
    expect(at({ tier: "asleep-2", held: 3 })).toEqual({ kind: "wake" });
  });

  test("crash back-off delays the activation", () => {
    expect(at({ tier: "cold", held: 1, now: 1_000, backoffUntil: 5_000 })).toEqual({
      kind: "wait",
      at: 5_000,
    });
  });

  test("a busy ready replica stays; an idle one sleeps after sleepAfter", () => {
    expect(at({ inFlight: 2, now: 10_000_000 })).toEqual({ kind: "wait", at: Number.POSITIVE_INFINITY });
    expect(at({ lastActive: 5_000, now: 10_000 })).toEqual({ kind: "wait", at: 65_000 });
    expect(at({ lastActive: 5_000, now: 65_000 })).toEqual({ kind: "drain-and-sleep", level: 1 });
    expect(at({ now: 60_000 }, { sleepLevel: 2 })).toEqual({ kind: "drain-and-sleep", level: 2 });
  });

  test("an engine without sleep mode goes straight to cold", () => {
    expect(at({ now: 60_000 }, { sleep: false })).toEqual({ kind: "drain-and-stop" });
  });

  test("asleep at level 1: deeper after deepSleepAfter, stopped after zeroAfter", () => {
    const asleep = { tier: "asleep-1" as const, since: 100, asleepSince: 100 };
    expect(at({ ...asleep, now: 200 })).toEqual({ kind: "wait", at: 600_100 });
    expect(at({ ...asleep, now: 600_100 })).toEqual({ kind: "deepen" });
    expect(at({ ...asleep, now: 600_100 }, { zeroAfter: 300_000 })).toEqual({ kind: "stop" });
  });

  test("the zero clock counts from the first sleep, not from deepening", () => {
    expect(at({ tier: "asleep-2", since: 600_000, asleepSince: 0, now: 700_000 })).toEqual({
      kind: "wait",
      at: 3_600_000,
    });
    expect(at({ tier: "asleep-2", since: 600_000, asleepSince: 0, now: 3_600_000 })).toEqual({
      kind: "stop",
    });
  });

  test("never means never", () => {
    const never = Number.POSITIVE_INFINITY;
    expect(at({ tier: "asleep-1", now: 1e12 }, { deepSleepAfter: never, zeroAfter: never })).toEqual({
      kind: "wait",
      at: never,
    });
  });

  test("demand during a drain takes the replica back", () => {
    expect(at({ tier: "draining", held: 1 })).toEqual({ kind: "undrain" });
    expect(at({ tier: "draining", inFlight: 1 })).toEqual({ kind: "wait", at: Number.POSITIVE_INFINITY });
  });
});
