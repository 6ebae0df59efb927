/**
 * The data plane ↔ control plane seam carried over HTTP (Kubernetes mode): activators POST demand
 * pokes and load stats to the autoscaler; an autoscaler replica that does not hold a model's Lease
 * forwards them to the one that does. Replica events travel the other way through the API (each
 * pod's `snooze.dev/tier` annotation, which every activator watches).
 */
export const demandPath = "/snooze/v1/demand";
export const statsPath = "/snooze/v1/stats";
/** Set on a forwarded request: the receiver acts or drops it, never forwards again. */
export const forwardedHeader = "snooze-forwarded-by";

export interface DemandBody {
  /** The activator that holds the request (its pod name), so loads add up per activator. */
  activator: string;
  /** The OpenAI model id. */
  model: string;
  /** A replica (pod name) the activator could not connect to. */
  unreachable?: string;
}

export interface StatsBody {
  activator: string;
  models: { model: string; inFlight: number; held: number }[];
}

export function isDemandBody(value: unknown): value is DemandBody {
  const v = value as DemandBody;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.activator === "string" &&
    typeof v.model === "string" &&
    (v.unreachable === undefined || typeof v.unreachable === "string")
  );
}

export function isStatsBody(value: unknown): value is StatsBody {
  const v = value as StatsBody;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.activator === "string" &&
    Array.isArray(v.models) &&
    v.models.every(
      (m) =>
        typeof m?.model === "string" &&
        Number.isInteger(m.inFlight) &&
        m.inFlight >= 0 &&
        Number.isInteger(m.held) &&
        m.held >= 0,
    )
  );
}
