import type { ReplicaEvent } from "./replica-event.ts";

/**
 * The seam between the data plane (activator) and the control plane
 * (autoscaler). Nothing else crosses it, so the Kubernetes mode can carry it
 * over HTTP and a watch while local mode passes an in-process object.
 */
export interface ControlPlane {
  /** A request is held for `model`: act now, do not wait for a stats tick. */
  demand(model: string, hint?: DemandHint): void;
  /** The activator's load for `model` now (see LoadReport). */
  stats(model: string, load: LoadReport): void;
  /** Replica events, starting with the current state of every known replica. Returns unsubscribe. */
  watch(listener: (event: ReplicaEvent) => void): () => void;
}

export interface DemandHint {
  /** A replica the activator could not connect to: the control plane re-checks it before trusting it. */
  unreachable?: string;
  /**
   * The activator's load for the model right now. With it the control plane replaces its last
   * report instead of adding a held request to it: a request held the moment another finished
   * would otherwise count twice until the next stats report (and an HPA or KEDA would overshoot).
   */
  load?: DemandLoad;
}

/**
 * An activator's running totals for a model since it started: requests that arrived (held or not),
 * requests an engine answered, and the time those took from dispatch to the last byte. The
 * autoscaler takes differences of successive reports for the arrival rate and the service time
 * (Little's law: what the arrival rate needs is rate × service time), so a lost report loses nothing.
 */
export interface Flow {
  arrived: number;
  completed: number;
  serviceMs: number;
}

/**
 * An activator's load for a model: requests in flight to its replicas, requests held, and how long
 * the oldest held request has waited (ms; the slot arbiter orders members by it).
 */
export interface DemandLoad {
  inFlight: number;
  held: number;
  oldestHeldMs?: number;
  /**
   * The replicas some held requests may go to alone (the maker of a stored response: the
   * Responses API's retrieve, cancel, `previous_response_id`): each is woken if it sleeps, whatever
   * other replicas are awake.
   */
  pinnedTo?: readonly string[];
}

/** What an activator reports of a model (`ControlPlane.stats`): its load, and what it has seen. */
export interface LoadReport extends DemandLoad {
  /** Its running totals, for the demand metric's arrival rate and service time. */
  flow?: Flow;
  /**
   * The replicas it sends requests to now, as it sees them (on Kubernetes its view of the pods may
   * lag: a drain waits until it no longer names the replica).
   */
  routed?: readonly string[];
}
