import { forgetSeries } from "../lib/forget-series.ts";
import { activationBuckets } from "../lib/metrics-buckets.ts";
import { Counter, Gauge, Histogram, type Registry } from "../lib/prometheus.ts";
import { type Tier, tiers } from "../lib/replica-event.ts";

/** A model as the tier gauge reads it at a scrape: its id and its tier as the control plane says it. */
export interface TieredModel {
  id: string;
  tier: Tier;
}

/**
 * `tiered`: the models this process leads (each id once, by the model that serves it), read at
 * each scrape. The gauge says what the control plane's own summary says (the admin API, the
 * Model's status), pending starts included, from that one place: pushed from each record's change
 * instead, it said `cold` while a start waited for its replica to appear (a pod not created yet, an
 * engine waiting for its fixed port), which the summary counts as `starting`.
 */
export function autoscalerMetrics(registry: Registry, tiered: () => Iterable<TieredModel> = () => []) {
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
    help: "1 for each model's tier (its most awake replica's, a start waiting for its replica counting as starting; cold with none), 0 for the others. Published by the model's leader only.",
    labelNames: ["model", "tier"],
    registers: [registry],
    collect() {
      // Whole at each scrape: a model this process no longer leads, or that is gone, says nothing.
      replicaTier.reset();
      for (const { id, tier: now } of tiered())
        for (const tier of tiers) replicaTier.set({ model: id, tier }, tier === now ? 1 : 0);
    },
  });
  return {
    activation,
    transition(model: string, from: Tier, to: Tier) {
      transitions.inc({ model, from, to });
    },
    /** A model gone for good (a reload removed it, its Model was deleted): its series go too. */
    forget(model: string) {
      for (const metric of [activation, transitions, replicaTier]) forgetSeries(metric, { model });
    },
  };
}

export type AutoscalerMetrics = ReturnType<typeof autoscalerMetrics>;
