/**
 * What the control plane shows of one model's learning (the admin API, `snooze status`): its
 * GPU-seconds against an always-on baseline, its prewarms, and the learned ladder in use.
 */
export interface LearningState {
  /** Replica-seconds awake (holding an accelerator) and asleep, and saved against one always awake. */
  gpuSeconds: { awake: number; asleep: number; saved: number };
  /** `asleep`: staged starts of a cold model that reached their sleep before a request came. */
  prewarms: {
    hit: number;
    wasted: number;
    asleep?: number;
    budgetLeftMs: number;
    active?: { kind: string; until: string };
  };
  /** The learned ladder in use (wakeTarget set and enough idle gaps seen), against the fixed one. */
  ladder?: {
    sleepAfter: string;
    sleep: "level 1" | "level 2" | "stop";
    deepSleepAfter: string;
    /** Expected awake GPU-seconds per idle gap, learned and fixed. */
    expectedAwakeSeconds: number;
    fixedAwakeSeconds: number;
    /** Share of idle gaps whose wake is expected to take longer than wakeTarget. */
    missShare: number;
    gaps: number;
  };
}
