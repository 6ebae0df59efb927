import { forgetSeries } from "../lib/forget-series.ts";
import { activationBuckets } from "../lib/metrics-buckets.ts";
import { Counter, Gauge, Histogram, type Registry } from "../lib/prometheus.ts";

/**
 * `inFlightNow`: each model the activator routes now (those being retired too) with its requests in
 * flight, read at each scrape: set on the control plane's reports instead, the gauge said 1 for up
 * to a stats interval after a burst of 5 began (reports go out at once only when a model's load
 * turns from none to some or back), while the admin API said 5.
 */
export function activatorMetrics(
  registry: Registry,
  inFlightNow: () => Iterable<{ model: string; inFlight: number }> = () => [],
) {
  const held = new Gauge({
    name: "snooze_held_requests",
    help: "Requests waiting in the activator for their model.",
    labelNames: ["model"],
    registers: [registry],
  });
  const inFlight = new Gauge({
    name: "snooze_in_flight_requests",
    help: "Requests dispatched to an engine and not yet finished.",
    labelNames: ["model"],
    registers: [registry],
    collect() {
      for (const { model, inFlight: now } of inFlightNow()) inFlight.set({ model }, now);
    },
  });
  const metrics = {
    requests: new Counter({
      name: "snooze_requests_total",
      help: "Requests answered by the activator, by model and HTTP status code; 499 when the client left before its answer was whole (as nginx counts it), even after a 200 went out.",
      labelNames: ["model", "code"],
      registers: [registry],
    }),
    held,
    inFlight,
    holdDuration: new Histogram({
      name: "snooze_hold_duration_seconds",
      help: "How long requests were held, by outcome (dispatched, budget, queue-full, activation-failed, shutdown, removed, replica-gone, abandoned).",
      labelNames: ["model", "outcome"],
      buckets: activationBuckets,
      registers: [registry],
    }),
    coalesced: new Counter({
      name: "snooze_coalesced_requests_total",
      help: "Requests held behind others for the same model: they joined the activation or swap already asked for.",
      labelNames: ["model"],
      registers: [registry],
    }),
    upstreamErrors: new Counter({
      name: "snooze_upstream_errors_total",
      help: "Forwards to an engine that failed, by reason (connect-timeout, unreachable, first-byte-timeout, idle-timeout, broken, local-resources, shutdown, drained, unresponsive, error); a request sent again after a failure counts each try.",
      labelNames: ["model", "reason"],
      registers: [registry],
    }),
    resent: new Counter({
      name: "snooze_resent_requests_total",
      help: "Requests sent again because their engine answered nothing (reason: unreachable, connect-timeout, unresponsive), once per request, counted when the next ready replica takes them (one refused or abandoned while held again is not).",
      labelNames: ["model", "reason"],
      registers: [registry],
    }),
    heldBytes: new Gauge({
      name: "snooze_held_body_bytes",
      help: "Request body bytes the activator keeps for requests being read or held (capped by maxHeldBytes).",
      registers: [registry],
    }),
    upstreamTtfb: new Histogram({
      name: "snooze_upstream_ttfb_seconds",
      help: "Time from dispatch to the engine's response headers.",
      labelNames: ["model"],
      // To firstByteTimeout's default (10 minutes): a slow first byte lands in a bucket, not only +Inf.
      buckets: [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600],
      registers: [registry],
    }),
  };
  const byModel = [
    metrics.requests,
    held,
    inFlight,
    metrics.holdDuration,
    metrics.coalesced,
    metrics.upstreamErrors,
    metrics.resent,
    metrics.upstreamTtfb,
  ];
  return {
    ...metrics,
    /**
     * A removed model's series go, its counters and histograms with its gauges: they can no longer
     * grow, and a Snooze whose reloads add and remove models for weeks kept about 60 series for
     * every model it had served (found by a probe). A model added again under the name starts from
     * zero, which Prometheus reads as a counter reset.
     */
    forget(model: string): void {
      for (const metric of byModel) forgetSeries(metric, { model });
    },
  };
}

export type ActivatorMetrics = ReturnType<typeof activatorMetrics>;
