import { forgetSeries } from "../lib/forget-series.ts";
import { activationBuckets } from "../lib/metrics-buckets.ts";
import { Counter, Gauge, Histogram, type Registry } from "../lib/prometheus.ts";
import { type Tier, tiers } from "../lib/replica-event.ts";

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
    help: "1 for each model's tier (its most awake replica's; cold with none), 0 for the others. Published by the model's leader only.",
    labelNames: ["model", "tier"],
    registers: [registry],
  });
  return {
    activation,
    transition(model: string, from: Tier, to: Tier) {
      transitions.inc({ model, from, to });
    },
    /** The model's tier now; undefined: this process does not lead it, so says nothing of it. */
    tier(model: string, now: Tier | undefined) {
      for (const tier of tiers)
        if (now === undefined) replicaTier.remove({ model, tier });
        else replicaTier.set({ model, tier }, tier === now ? 1 : 0);
    },
    /** A model gone for good (a reload removed it, its Model was deleted): its series go too. */
    forget(model: string) {
      for (const metric of [activation, transitions, replicaTier]) forgetSeries(metric, { model });
    },
  };
}

export type AutoscalerMetrics = ReturnType<typeof autoscalerMetrics>;
