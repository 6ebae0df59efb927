import { Counter, Gauge, Histogram, type Registry } from "prom-client";
import { type Tier, tiers } from "../lib/replica-event.ts";

/** Buckets from 10 ms to 10 minutes: wakes take seconds, cold starts minutes. */
export const activationBuckets = [0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600];

export function autoscalerMetrics(registry: Registry) {
  const activation = new Histogram({
    name: "snooze_activation_duration_seconds",
    help: "Time from the decision to activate a replica until it is ready, by the tier it started from and outcome.",
    labelNames: ["model", "from", "outcome"],
    buckets: activationBuckets,
    registers: [registry],
  });
  const transitions = new Counter({
    name: "snooze_tier_transitions_total",
    help: "Tier changes of replicas, by model, from and to.",
    labelNames: ["model", "from", "to"],
    registers: [registry],
  });
  const replicaTier = new Gauge({
    name: "snooze_replica_tier",
    help: "1 for the tier each model's replica is in, 0 for the others.",
    labelNames: ["model", "tier"],
    registers: [registry],
  });
  return {
    activation,
    transition(model: string, from: Tier, to: Tier) {
      transitions.inc({ model, from, to });
      for (const tier of tiers) replicaTier.set({ model, tier }, tier === to ? 1 : 0);
    },
  };
}

export type AutoscalerMetrics = ReturnType<typeof autoscalerMetrics>;
