import { flexInferDefaults, flexInferPolicy } from "./flexinfer-policy.ts";
import { arbiterPolicy, type PolicyUnderTest } from "./policy.ts";
import { type PolicyResult, summarizeRun } from "./results.ts";
import { dedicatedConfig } from "./scenario.ts";
import { type SimConfig, simulateSlot } from "./simulator.ts";
import type { TraceRequest } from "./trace.ts";

/** The policies the issue compares, fresh for one run (the FlexInfer-like one keeps state). */
export function policiesUnderTest(): PolicyUnderTest[] {
  return [arbiterPolicy("sticky"), arbiterPolicy("fifo"), flexInferPolicy(flexInferDefaults)];
}

/** Replays one trace against every policy, each in its own simulation of the same slot. */
export function comparePolicies(requests: readonly TraceRequest[], config: SimConfig): PolicyResult[] {
  const members = config.models.filter((m) => m.inSlot).map((m) => m.id);
  return policiesUnderTest().map((policy) => summarizeRun(simulateSlot(requests, config, policy), members));
}

/** The same trace with no sharing at all: the lower bound of hold times. */
export function dedicatedReference(requests: readonly TraceRequest[], config: SimConfig): PolicyResult {
  const members = config.models.filter((m) => m.inSlot).map((m) => m.id);
  const result = simulateSlot(requests, dedicatedConfig(config), arbiterPolicy("sticky"));
  return { ...summarizeRun(result, members), policy: "(dedicated GPUs, no slot)" };
}
