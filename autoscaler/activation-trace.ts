/**
 * The trace of an activation (a start or a wake, from the decision to the first routable moment):
 * its span begun under the right parent, its log lines within it, and its end with the outcome
 * and the activation-duration metric. Apart from the controller and its operations, which both
 * begin and end activations, so the span mechanics are written once.
 */
import { type Context, context, SpanStatusCode, TraceFlags, trace } from "@opentelemetry/api";
import type { Clock } from "../lib/clock.ts";
import type { Tier } from "../lib/replica-event.ts";
import { tracer } from "../lib/tracing.ts";
import type { AutoscalerMetrics } from "./metrics.ts";
import type { Activation, ReplicaRecord } from "./replica-record.ts";

/**
 * Begins a start's or a wake's activation span under `parent` (a swap's, a prewarm's or a held
 * request's trace, or the root); a start also times the platform's part in its own span.
 */
export function startActivation(
  model: string,
  kind: "start" | "wake",
  from: Tier,
  started: number,
  parent: Context,
): Activation {
  const parentSpan = trace.getSpan(parent)?.spanContext();
  // A parent its sampler passed over would take the activation, which every request held for it
  // shares, out of all their traces: it begins a trace of its own then, linked to that parent,
  // and the sampled requests that wait on it show it (found by an outside tester).
  const unsampled = parentSpan !== undefined && (parentSpan.traceFlags & TraceFlags.SAMPLED) === 0;
  const span = tracer.startSpan(
    "snooze.activation",
    {
      // Its own trace unless a swap started it: no client request owns an activation.
      root: parentSpan === undefined || unsampled,
      ...(unsampled ? { links: [{ context: parentSpan }] } : {}),
      attributes: { "snooze.model": model, "snooze.from_tier": from, "snooze.activation": kind },
    },
    parent,
  );
  const ctx = trace.setSpan(parent, span);
  const activation: Activation = { kind, from, span, context: ctx, started };
  if (kind === "start") activation.startSpan = tracer.startSpan("snooze.start", {}, ctx);
  return activation;
}

/** Runs `fn` in the trace of the replica's activation, if one runs: its log lines carry its ids. */
export function inActivation<T>(record: ReplicaRecord, fn: () => T): T {
  return record.activation ? context.with(record.activation.context, fn) : fn();
}

/**
 * Ends the replica's activation, if one runs: its spans with `outcome`, and its duration observed
 * when it ended ready or failed (a stopped one is neither).
 */
export function endActivation(
  c: { readonly id: string; readonly deps: { readonly clock: Clock; readonly metrics: AutoscalerMetrics } },
  record: ReplicaRecord,
  outcome: "ready" | "failed" | "stopped",
  reason?: string,
): void {
  const activation = record.activation;
  if (!activation) return;
  record.activation = undefined;
  // A start still under way when the activation failed (startTimeout) failed with it.
  if (outcome === "failed") activation.startSpan?.setStatus({ code: SpanStatusCode.ERROR, message: reason });
  activation.startSpan?.end();
  if (outcome === "ready" || outcome === "failed")
    c.deps.metrics.activation.observe(
      { model: c.id, from: activation.from, outcome },
      (c.deps.clock.now() - activation.started) / 1000,
    );
  if (outcome === "failed") activation.span.setStatus({ code: SpanStatusCode.ERROR, message: reason });
  activation.span.setAttribute("snooze.activation.outcome", outcome);
  activation.span.end();
}
