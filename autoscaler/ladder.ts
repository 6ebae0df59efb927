import type { Tier } from "../lib/replica-event.ts";
import type { ResolvedTierSettings } from "../lib/settings/index.ts";

/**
 * The tier ladder for one replica, as a pure function of its state, its load
 * and the clock. It says what to do now and when to look again; it never acts.
 */
export interface LadderInput {
  tier: Tier;
  /** When the replica entered its tier (epoch ms). */
  since: number;
  /** When it fell asleep, at either level (epoch ms); the zero clock counts from here. */
  asleepSince: number;
  /** Requests in flight to the replica and held for the model. */
  inFlight: number;
  held: number;
  /** Last moment the model had work (in flight or held). */
  lastActive: number;
  now: number;
  /** No activation before this moment (crash back-off). */
  backoffUntil: number;
}

export type LadderSettings = Pick<
  ResolvedTierSettings,
  "sleep" | "sleepAfter" | "sleepLevel" | "deepSleepAfter" | "zeroAfter"
>;

export type LadderAction =
  | { kind: "start" }
  | { kind: "wake" }
  /** Demand came back while draining for sleep: take traffic again. */
  | { kind: "undrain" }
  /** Idle long enough: drain, then sleep at `level` (or stop when sleep is off). */
  | { kind: "drain-and-sleep"; level: 1 | 2 }
  | { kind: "drain-and-stop" }
  | { kind: "deepen" }
  | { kind: "stop" }
  /** Nothing to do; look again at `at` (Infinity: only on the next event). */
  | { kind: "wait"; at: number };

export function decideTier(input: LadderInput, settings: LadderSettings): LadderAction {
  const { tier, since, now } = input;
  const wanted = input.held > 0;
  const idle = input.inFlight === 0 && input.held === 0;
  switch (tier) {
    case "cold":
    case "asleep-1":
    case "asleep-2": {
      if (wanted) {
        if (now < input.backoffUntil) return { kind: "wait", at: input.backoffUntil };
        return { kind: tier === "cold" ? "start" : "wake" };
      }
      if (tier === "cold") return { kind: "wait", at: Number.POSITIVE_INFINITY };
      const zeroAt = input.asleepSince + settings.zeroAfter;
      if (tier === "asleep-1") {
        const deepAt = since + settings.deepSleepAfter;
        if (now >= zeroAt) return { kind: "stop" };
        if (now >= deepAt) return { kind: "deepen" };
        return { kind: "wait", at: Math.min(deepAt, zeroAt) };
      }
      return now >= zeroAt ? { kind: "stop" } : { kind: "wait", at: zeroAt };
    }
    case "ready": {
      if (!idle) return { kind: "wait", at: Number.POSITIVE_INFINITY };
      const sleepAt = Math.max(input.lastActive, since) + settings.sleepAfter;
      if (now < sleepAt) return { kind: "wait", at: sleepAt };
      return settings.sleep
        ? { kind: "drain-and-sleep", level: settings.sleepLevel }
        : { kind: "drain-and-stop" };
    }
    case "draining":
      return wanted ? { kind: "undrain" } : { kind: "wait", at: Number.POSITIVE_INFINITY };
    case "starting":
    case "waking":
      return { kind: "wait", at: Number.POSITIVE_INFINITY };
  }
}
