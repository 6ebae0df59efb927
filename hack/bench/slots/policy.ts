import {
  decideSlot,
  type SlotDecision,
  type SlotMember,
  type SlotPolicy,
  type SlotState,
} from "../../../autoscaler/slot-arbiter.ts";

/**
 * What the simulator asks a slot policy: the arbiter's own input, less the
 * policy name, with one more observation per member that the control plane
 * has too (FlexInfer's demand signal needs it; the arbiter ignores it).
 */
export interface BenchSlotMember extends SlotMember {
  /** When the member's latest request arrived (virtual ms); undefined before its first. */
  lastRequestAt?: number;
}

export type BenchSlotState = Omit<SlotState, "policy" | "members"> & { members: BenchSlotMember[] };

export interface PolicyUnderTest {
  name: string;
  /** Called with the slot's state whenever something changes; a fresh instance per run. */
  decide(state: BenchSlotState): SlotDecision;
}

/** Snooze's own arbiter, unchanged: the real `decideSlot` with its policy name bound. */
export function arbiterPolicy(policy: SlotPolicy): PolicyUnderTest {
  return { name: policy, decide: (state) => decideSlot({ ...state, policy }) };
}
