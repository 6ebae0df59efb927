/**
 * The demand number external scalers (KEDA, an HPA on its metric) scale a Model on: how many
 * requests at once the Model needs, what the HPA divides by its per-replica target.
 *
 * Held + in-flight, the number this used to be, is wrong for that under open-loop arrivals: while a
 * new replica warms up the requests held for it pile up, the HPA (which proposes
 * ceil(metric / target), an absolute count) asks for replicas to serve the pile too, and by the time
 * those replicas are up the pile is gone. That re-requests capacity that is already warming, the
 * mistake seed 003 measured (5.85× the replica-seconds). So the demand is Little's law: the arrival
 * rate the activators see × the service time they see (dispatch to last byte, the hold left out),
 * which is what the arrivals need whatever is queued. Two corrections, each with its reason:
 *
 * - backlog: held requests beyond what the warming replicas take the moment they are up
 *   (concurrency × warming) are drained over the time a new replica takes to come up (not over
 *   one service time): capacity asked for the backlog arrives a start later, and asking for more
 *   than that would arrive after the backlog it was for. A closed loop (clients that wait for their
 *   answer) caps its own arrival rate at what is served; this term is what still grows it.
 * - bounds: never more than the requests that were present at once in the window's reports, or 1
 *   (a burst of arrivals is not a rate, and a closed loop's answers that end together make its
 *   rate jump by a whole round), never less than the awake and warming capacity that requests fill now
 *   (a capacity already asked for is not given up while requests wait for it).
 *
 * Until a service time is known (no answer seen yet, or no two reports to take a rate from), it is
 * in-flight + the held requests the warming replicas will not absorb. Pure: reports, replica
 * counts, concurrency and `now` in, the number out.
 */

/** One stats report of one activator: its load then and its running totals (lib/control-plane.ts Flow). */
export interface FlowReport {
  at: number;
  inFlight: number;
  held: number;
  arrived: number;
  completed: number;
  serviceMs: number;
}

/** Rates are taken over this much of each activator's recent reports (they report every second). */
export const rateWindowMs = 5_000;
/** A rate needs reports at least this far apart. */
const minSpanMs = 1_000;
/** The backlog's drain time when no start of the Model was measured or learned. */
export const defaultDrainMs = 10_000;
const maxReports = 32;

/**
 * An activator's reports kept for the rates: those inside the window, from its last restart on
 * (a running total that went down is a new activator process under the same name).
 */
export function trimReports(reports: FlowReport[], now: number): FlowReport[] {
  let from = 0;
  for (let i = 1; i < reports.length; i++) {
    const [a, b] = [reports[i - 1]!, reports[i]!];
    if (b.arrived < a.arrived || b.completed < a.completed || b.serviceMs < a.serviceMs) from = i;
  }
  const kept = reports.slice(from).filter((r) => r.at >= now - rateWindowMs);
  return kept.slice(-maxReports);
}

export interface DemandInput {
  /** The Model's load now, over all activators. */
  inFlight: number;
  held: number;
  /** Each activator's recent reports, oldest first (trimReports). */
  reports: FlowReport[][];
  /** Replicas awake and serving, and replicas starting or waking (each to take `concurrency`). */
  ready: number;
  warming: number;
  /** Requests one replica takes at once (the Model's concurrency); undefined or 0: unlimited. */
  concurrency?: number;
  /** How long a new replica takes to serve (the Model's measured or learned start). */
  startMs?: number;
  now: number;
}

export interface DemandEstimate {
  /** Requests at once the Model needs (two decimals). */
  demand: number;
  /** "rate": arrival rate × service time; "held": in-flight + held, no service time known yet. */
  basis: "rate" | "held";
  /** Requests per second arriving at the activators, when two reports give it. */
  arrivalRate?: number;
  /** Mean service time the activators saw (the window's answers, else all since they started). */
  serviceMs?: number;
  /** Held requests the warming replicas will not take when they are up. */
  backlog: number;
}

export function demandOf(input: DemandInput): DemandEstimate {
  const { inFlight, held, ready, warming } = input;
  const perReplica = input.concurrency !== undefined && input.concurrency > 0 ? input.concurrency : Infinity;
  const absorbed = warming > 0 ? Math.min(held, perReplica * warming) : 0;
  const backlog = held - absorbed;
  const present = inFlight + held;
  const floor = ready + warming > 0 ? Math.min(present, perReplica * (ready + warming)) : 0;

  let arrivalRate: number | undefined;
  let windowCompleted = 0;
  let windowServiceMs = 0;
  let allCompleted = 0;
  let allServiceMs = 0;
  let peak = 0;
  for (const reports of input.reports) {
    const first = reports[0];
    const last = reports.at(-1);
    if (!first || !last) continue;
    allCompleted += last.completed;
    allServiceMs += last.serviceMs;
    peak += Math.max(...reports.map((r) => r.inFlight + r.held));
    const spanMs = last.at - first.at;
    if (spanMs < minSpanMs) continue;
    arrivalRate = (arrivalRate ?? 0) + ((last.arrived - first.arrived) * 1_000) / spanMs;
    windowCompleted += last.completed - first.completed;
    windowServiceMs += last.serviceMs - first.serviceMs;
  }
  const serviceMs =
    windowCompleted > 0
      ? windowServiceMs / windowCompleted
      : allCompleted > 0
        ? allServiceMs / allCompleted
        : undefined;

  const round = (n: number) => Math.round(n * 100) / 100;
  if (arrivalRate === undefined || serviceMs === undefined || serviceMs <= 0)
    return {
      demand: round(Math.max(floor, inFlight + backlog)),
      basis: "held",
      ...(arrivalRate !== undefined ? { arrivalRate: round(arrivalRate) } : {}),
      ...(serviceMs !== undefined ? { serviceMs: Math.round(serviceMs) } : {}),
      backlog,
    };
  const drainMs = Math.max(input.startMs ?? defaultDrainMs, serviceMs);
  const need = Math.max(inFlight, (arrivalRate * serviceMs) / 1_000) + (backlog * serviceMs) / drainMs;
  return {
    demand: round(Math.max(floor, Math.min(need, Math.max(peak, present, 1)))),
    basis: "rate",
    arrivalRate: round(arrivalRate),
    serviceMs: Math.round(serviceMs),
    backlog,
  };
}
