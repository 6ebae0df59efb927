/**
 * The data plane ↔ control plane seam carried over HTTP (Kubernetes mode): activators POST demand
 * pokes and load stats to the autoscaler; an autoscaler replica that does not hold a model's Lease
 * forwards them to the one that does. Replica events travel the other way through the API (each
 * pod's `snooze.dev/tier` annotation, which every activator watches). Every request carries its
 * caller's ServiceAccount token (`callerHeaders`), checked by the autoscaler with a TokenReview.
 */
export const demandPath = "/snooze/v1/demand";
export const statsPath = "/snooze/v1/stats";
/** Set on a forwarded request: the receiver acts or drops it, never forwards again. */
export const forwardedHeader = "snooze-forwarded-by";

/** Whatever can show a Kubernetes bearer token for its caller: a KubeClient. */
export interface TokenSource {
  bearerToken(): Promise<string | undefined>;
}

/**
 * Headers of a request to an autoscaler: the caller's own ServiceAccount token as a bearer (an
 * activator's, or the forwarding autoscaler replica's), which the autoscaler checks with a
 * TokenReview, plus `extra`. No token (client-certificate credentials): no Authorization, and the
 * autoscaler answers 401.
 */
export async function callerHeaders(
  source: TokenSource,
  extra: Record<string, string> = {},
): Promise<Record<string, string>> {
  const token = await source.bearerToken();
  return { ...extra, ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

export interface DemandBody {
  /** The activator that holds the request (its pod name), so loads add up per activator. */
  activator: string;
  /** The OpenAI model id. */
  model: string;
  /** A replica (pod name) the activator could not connect to. */
  unreachable?: string;
  /** The activator's load for the model at the moment of the demand (see DemandHint.load). */
  inFlight?: number;
  held?: number;
  oldestHeldMs?: number;
  /** Replicas some held requests may go to alone (DemandLoad.pinnedTo). */
  pinnedTo?: string[];
  /** The load's stamp: a report older than one applied already is dropped (autoscaler/kube/load-order.ts). */
  seq?: number;
}

export interface StatsBody {
  activator: string;
  /** `oldestHeldMs`: how long the oldest held request has waited (the slot arbiter orders members by it). */
  models: {
    model: string;
    inFlight: number;
    held: number;
    oldestHeldMs?: number;
    /** The load's stamp, taken when it was seen (see DemandBody.seq). */
    seq?: number;
    /** Running totals since the activator started (see Flow): the demand metric's arrival rate and service time. */
    arrived?: number;
    completed?: number;
    serviceMs?: number;
    /** The replicas the activator sends this model's requests to, as it sees them (ControlPlane.stats). */
    routed?: string[];
    /** Replicas some held requests may go to alone (DemandLoad.pinnedTo). */
    pinnedTo?: string[];
  }[];
}

/**
 * A person's action on a model, through an activator's admin API, carried out by the model's leader.
 * `prewarm` (the `dev.snooze.model.prewarm` event, or a `/v1/models` hint) carries its `PrewarmAsk`
 * in the query: `?forMs=<ms>`, and `&hint=1` for a hint.
 */
export type AdminVerb = "wake" | "sleep" | "stop" | "prewarm";
export const adminVerbs: readonly AdminVerb[] = ["wake", "sleep", "stop", "prewarm"];
export const adminRoute = /^\/snooze\/v1\/models\/([^/]+)\/(wake|sleep|stop|prewarm)$/;

/**
 * How long a prewarm keeps the model awake (within its prewarmBudget). A `hint` (a client listing
 * models) acts only within the budget: with none left it does nothing, where an event still wakes.
 */
export interface PrewarmAsk {
  forMs: number;
  hint?: boolean;
}

export function adminPath(model: string, verb: AdminVerb, prewarm?: PrewarmAsk): string {
  const path = `/snooze/v1/models/${encodeURIComponent(model)}/${verb}`;
  if (verb !== "prewarm" || !prewarm) return path;
  return `${path}?forMs=${Math.round(prewarm.forMs)}${prewarm.hint ? "&hint=1" : ""}`;
}

/**
 * A prewarm's ask from the query of its admin request: `forMs` a whole number of ms, 0 or more (0:
 * an event's prewarm without `for`, or with `"0s"`: a wake at prewarm priority, nothing kept).
 */
export function prewarmAsk(query: string): { ok: true; ask: PrewarmAsk } | { ok: false; message: string } {
  const params = new URLSearchParams(query);
  const raw = params.get("forMs");
  const forMs = raw === null || raw.trim() === "" ? Number.NaN : Number(raw);
  if (!Number.isInteger(forMs) || forMs < 0)
    return {
      ok: false,
      message: `a prewarm needs ?forMs= (whole milliseconds, 0 or more); got ${JSON.stringify(raw)}`,
    };
  return { ok: true, ask: { forMs, ...(params.get("hint") === "1" ? { hint: true } : {}) } };
}
/** An admin action waits for the engine (a cold start may take minutes); past this it is still under way. */
export const adminTimeoutMs = 10 * 60_000;
export interface AdminOutcome {
  status: number;
  message: string;
  tier?: string;
  /** A prewarm: how long the model is kept awake (within its prewarmBudget). */
  keptMs?: number;
  /** A sleep or stop not done (504): a request or a wake after it was asked took the model back. */
  takenBack?: boolean;
  /** A sleep that failed (502): the engine was stopped instead; `message` is why the sleep failed. */
  stoppedInstead?: boolean;
}
/** Every slot's status, from every autoscaler replica that leads one. */
export const slotsPath = "/snooze/v1/slots";

export function isDemandBody(value: unknown): value is DemandBody {
  const v = value as DemandBody;
  return (
    typeof v === "object" &&
    v !== null &&
    typeof v.activator === "string" &&
    typeof v.model === "string" &&
    (v.unreachable === undefined || typeof v.unreachable === "string") &&
    (v.inFlight === undefined || (Number.isInteger(v.inFlight) && v.inFlight >= 0)) &&
    (v.held === undefined || (Number.isInteger(v.held) && v.held >= 0)) &&
    (v.oldestHeldMs === undefined || (typeof v.oldestHeldMs === "number" && v.oldestHeldMs >= 0)) &&
    isNameList(v.pinnedTo)
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
        m.held >= 0 &&
        (m.oldestHeldMs === undefined || (typeof m.oldestHeldMs === "number" && m.oldestHeldMs >= 0)) &&
        (m.arrived === undefined || (Number.isInteger(m.arrived) && m.arrived >= 0)) &&
        (m.completed === undefined || (Number.isInteger(m.completed) && m.completed >= 0)) &&
        (m.serviceMs === undefined || (typeof m.serviceMs === "number" && m.serviceMs >= 0)) &&
        isNameList(m.routed) &&
        isNameList(m.pinnedTo),
    )
  );
}

/** An optional list of replica names. */
function isNameList(value: unknown): boolean {
  return value === undefined || (Array.isArray(value) && value.every((name) => typeof name === "string"));
}

/**
 * The stamp of an activator's load report (`seq`): increasing within a process, and above any
 * earlier process's (a microsecond clock), so a restarted activator's reports are not taken for old.
 */
export function nextLoadSeq(last: number, nowMs = Date.now()): number {
  return Math.max(last + 1, nowMs * 1_000);
}
