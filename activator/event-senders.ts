import type { AdminRefusal } from "./admin-guard.ts";
import type { EventVerb } from "./incoming-event.ts";

/** What one event of a delivery asks: a verb on a model (by its id). */
export interface EventAction {
  verb: EventVerb;
  model: string;
}

/**
 * Senders of events to `POST /snooze/v1/events` who hold no admin token but a token of their own
 * (on Kubernetes, Knative Eventing's OIDC token of a Trigger: kube-event-senders.ts). The endpoint
 * asks once it knows what the delivery's events want done, so a sender may be allowed one model,
 * or only to prewarm, and not the rest.
 */
export interface EventSenders {
  /** Why `token`'s holder may not do `actions`; undefined when it may do them all. */
  refusal(token: string, actions: readonly EventAction[]): Promise<AdminRefusal | undefined>;
}
