import { Counter, Gauge, Histogram, type Registry } from "../lib/prometheus.ts";

export function webhookMetrics(registry: Registry) {
  return {
    requests: new Counter({
      name: "snooze_webhook_requests_total",
      help: "Admission reviews answered, by webhook and verdict (allowed, patched, denied, malformed, error).",
      labelNames: ["webhook", "verdict"],
      registers: [registry],
    }),
    duration: new Histogram({
      name: "snooze_webhook_duration_seconds",
      help: "Time from the review's arrival to its answer, by webhook.",
      labelNames: ["webhook"],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers: [registry],
    }),
    certificateExpiry: new Gauge({
      name: "snooze_webhook_certificate_expiry_timestamp_seconds",
      help: "When the serving certificate in use expires (Unix time).",
      registers: [registry],
    }),
    certificateReloads: new Counter({
      name: "snooze_webhook_certificate_reloads_total",
      help: "Times a new serving certificate was loaded into the running server.",
      registers: [registry],
    }),
  };
}

export type WebhookMetrics = ReturnType<typeof webhookMetrics>;
