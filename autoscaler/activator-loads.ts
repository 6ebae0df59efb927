/**
 * One model's load as each activator tells it (a held request's demand, the periodic stats
 * reports): merged per activator, summed over those that reported within their expiry, and asked
 * which activator may still route to a replica. Owns the map and nothing else: what a report means
 * for the model (activity, a person's sleep ended, a pass) stays with the controller.
 */
import type { DemandLoad, LoadReport } from "../lib/control-plane.ts";
import { type FlowReport, trimReports } from "./demand-metric.ts";

/** One activator's load for this model. */
export interface Load {
  inFlight: number;
  held: number;
  heldSince?: number;
  at: number;
  /** The activator's recent stats reports, oldest first (the demand metric's rates; demand-metric.ts). */
  reports?: FlowReport[];
  /** The replicas it sent requests to at its last report that said (`at`): a drain waits for it. */
  routed?: { replicas: readonly string[]; at: number };
  /** Replicas some of its held requests may go to alone (DemandLoad.pinnedTo). */
  pinnedTo?: readonly string[];
}

/** The model's load summed over live activators. */
export interface ModelLoad {
  inFlight: number;
  held: number;
  heldSince?: number;
  pinnedTo?: readonly string[];
}

export class ActivatorLoads {
  private readonly byActivator = new Map<string, Load>();
  /** An activator that stopped reporting for this long no longer counts (Infinity in-process). */
  private readonly expiryMs: number;

  constructor(expiryMs: number) {
    this.expiryMs = expiryMs;
  }

  get(activator: string): Load | undefined {
    return this.byActivator.get(activator);
  }

  /** A request is held in `activator` (with its load of this moment, when it says). */
  demand(activator: string, now: number, load?: DemandLoad): void {
    const entry = this.byActivator.get(activator);
    // With the activator's load of this moment, it replaces the last report (which may still count
    // a request that just finished); without it, one held request is added to what was reported.
    const held = Math.max(load?.held ?? entry?.held ?? 0, 1);
    const pinnedTo = load ? load.pinnedTo : entry?.pinnedTo;
    this.byActivator.set(activator, {
      inFlight: load?.inFlight ?? entry?.inFlight ?? 0,
      held,
      heldSince: load?.oldestHeldMs !== undefined ? now - load.oldestHeldMs : (entry?.heldSince ?? now),
      at: now,
      ...(entry?.reports ? { reports: entry.reports } : {}),
      // A demand says nothing of the replicas: the last report's word, with its own time, stands.
      ...(entry?.routed ? { routed: entry.routed } : {}),
      ...(pinnedTo?.length ? { pinnedTo } : {}),
    });
  }

  /**
   * A stats report that changes nothing held (report-pass.ts): only the requests in flight, the
   * time (an activator's expiry counts from it) and the replicas it routes to are new.
   */
  refresh(before: Load, now: number, inFlight: number, routed?: readonly string[]): void {
    const seen = routed ? { replicas: routed, at: now } : before.routed;
    before.inFlight = inFlight;
    before.at = now;
    if (seen) before.routed = seen;
  }

  /**
   * A stats report. `oldestHeldMs`: how long the oldest request held there has waited, when the
   * activator knows. `routed`: the replicas it sends requests to, as it sees them (undefined: it
   * does not say). `pinnedTo`: replicas some held requests may go to alone (DemandLoad.pinnedTo).
   */
  report(
    activator: string,
    now: number,
    { inFlight, held, oldestHeldMs, flow, routed, pinnedTo }: LoadReport,
  ): void {
    const before = this.byActivator.get(activator);
    const seen = routed ? { replicas: routed, at: now } : before?.routed;
    // A queue that never empties keeps moving its oldest entry forward: the activator's age wins.
    const heldSince =
      held === 0 ? undefined : oldestHeldMs !== undefined ? now - oldestHeldMs : (before?.heldSince ?? now);
    const reports = flow
      ? trimReports([...(before?.reports ?? []), { at: now, inFlight, held, ...flow }], now)
      : undefined;
    this.byActivator.set(activator, {
      inFlight,
      held,
      heldSince,
      at: now,
      ...(reports ? { reports } : {}),
      ...(seen ? { routed: seen } : {}),
      ...(held > 0 && pinnedTo?.length ? { pinnedTo } : {}),
    });
  }

  /**
   * The load summed over the activators that reported recently (the expired ones are dropped),
   * on top of `base` (a person's wake counts as one request held since it was asked).
   */
  total(now: number, base: { held: number; heldSince?: number }): ModelLoad {
    let inFlight = 0;
    let pinnedTo: Set<string> | undefined;
    let { held, heldSince } = base;
    for (const [id, entry] of this.byActivator) {
      if (now - entry.at > this.expiryMs) {
        this.byActivator.delete(id);
        continue;
      }
      inFlight += entry.inFlight;
      held += entry.held;
      if (entry.held > 0 && entry.heldSince !== undefined)
        heldSince = Math.min(heldSince ?? entry.heldSince, entry.heldSince);
      if (entry.pinnedTo) {
        pinnedTo ??= new Set();
        for (const replica of entry.pinnedTo) pinnedTo.add(replica);
      }
    }
    if (held > 0) heldSince ??= now;
    return { inFlight, held, heldSince, ...(pinnedTo ? { pinnedTo: [...pinnedTo] } : {}) };
  }

  /** Each live activator's recent stats reports with running totals (the demand metric's input). */
  flowReports(now: number): FlowReport[][] {
    const out: FlowReport[][] = [];
    for (const entry of this.byActivator.values())
      if (now - entry.at <= this.expiryMs && entry.reports) out.push(entry.reports);
    return out;
  }

  /** Requests in flight or held (not an admin wake or a prewarm): what the history learns from. */
  busyWithRequests(now: number): boolean {
    for (const entry of this.byActivator.values())
      if (now - entry.at <= this.expiryMs && (entry.inFlight > 0 || entry.held > 0)) return true;
    return false;
  }

  /** When the next activator's word expires (the moment a pass must look again). */
  nextExpiry(): number {
    let next = Number.POSITIVE_INFINITY;
    for (const entry of this.byActivator.values()) next = Math.min(next, entry.at + this.expiryMs + 1);
    return next;
  }

  /**
   * A live activator that may still send requests to `replica`: its last report since `since` (a
   * drain's start) names it, or it has not reported since (its word predates the drain). On
   * Kubernetes an activator learns of the drain from its pod watch, which lags while the API server
   * is away or the watch is in back-off: a replica put to sleep then would get its requests and
   * hang them (found by the API server restart e2e test). Activators that do not say (local mode)
   * are not waited for.
   */
  routedBy(replica: string, since: number, now: number): string | undefined {
    for (const [activator, entry] of this.byActivator) {
      if (!entry.routed || now - entry.at > this.expiryMs) continue;
      if (entry.routed.at < since || entry.routed.replicas.includes(replica)) return activator;
    }
    return undefined;
  }
}
