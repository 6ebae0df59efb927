import { forgetSeries } from "../lib/forget-series.ts";
import { activationBuckets } from "../lib/metrics-buckets.ts";
import { Counter, Gauge, Histogram, type Registry } from "../lib/prometheus.ts";
import { type Tier, tiers } from "../lib/replica-event.ts";
import { modelScope } from "./model-scope.ts";

/** A model as the tier gauge reads it at a scrape: its id and its tier as the control plane says it. */
export interface TieredModel {
  id: string;
  /** How the platform names it: its id locally, `namespace/name` on Kubernetes. */
  key: string;
  tier: Tier;
}

/** The metrics one model's controller writes (`autoscalerMetrics(...).of(key)`). */
export interface AutoscalerMetrics {
  activation: { observe(labels: { model: string; from: Tier; outcome: string }, seconds: number): void };
  transition(model: string, from: Tier, to: Tier): void;
}

/**
 * `tiered`: the models this process leads (each id once, by the model that serves it; on
 * Kubernetes, `namespaced`, each Model), read at each scrape. The gauge says what the control plane's own summary says (the admin API, the
 * Model's status), pending starts included, from that one place: pushed from each record's change
 * instead, it said `cold` while a start waited for its replica to appear (a pod not created yet, an
 * engine waiting for its fixed port), which the summary counts as `starting`.
 */
export function autoscalerMetrics(
  registry: Registry,
  tiered: () => Iterable<TieredModel> = () => [],
  { namespaced = false }: { namespaced?: boolean } = {},
) {
  const scope = modelScope(namespaced);
  const activation = new Histogram({
    name: "snooze_activation_duration_seconds",
    help: "Time from the decision to activate a replica until it is ready, by the tier it started from and outcome.",
    labelNames: ["model", ...scope.labelNames, "from", "outcome"],
    buckets: activationBuckets,
    registers: [registry],
  });
  const transitions = new Counter({
    name: "snooze_tier_transitions_total",
    help: "Tier changes of replicas, by model, from and to.",
    labelNames: ["model", ...scope.labelNames, "from", "to"],
    registers: [registry],
  });
  const replicaTier = new Gauge({
    name: "snooze_replica_tier",
    help: "1 for each model's tier (its most awake replica's, a start waiting for its replica counting as starting; cold with none), 0 for the others. Published by the model's leader only.",
    labelNames: ["model", ...scope.labelNames, "tier"],
    registers: [registry],
    collect() {
      // Whole at each scrape: a model this process no longer leads, or that is gone, says nothing.
      replicaTier.reset();
      for (const { id, key, tier: now } of tiered())
        for (const tier of tiers)
          replicaTier.set({ model: id, ...scope.of(key), tier }, tier === now ? 1 : 0);
    },
  });
  return {
    /** What the controller of the model `key` writes, in its own series. */
    of(key: string): AutoscalerMetrics {
      const own = scope.of(key);
      return {
        activation: { observe: (labels, seconds) => activation.observe({ ...labels, ...own }, seconds) },
        transition: (model, from, to) => transitions.inc({ model, ...own, from, to }),
      };
    },
    /** A model gone for good (a reload removed it, its Model was deleted): its series go too. */
    forget(model: string, key?: string) {
      for (const metric of [activation, transitions, replicaTier])
        forgetSeries(metric, { model, ...scope.of(key) });
    },
  };
}
