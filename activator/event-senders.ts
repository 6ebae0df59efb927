import type { AdminRefusal } from "./admin-guard.ts";
import type { EventVerb } from "./incoming-event.ts";

/** What one event of a delivery asks: a verb on a model (by its id). */
export interface EventAction {
  verb: EventVerb;
  model: string;
}

/** The checks of one delivery whose sender holds a token of its own. */
export interface SenderCheck {
  /** Whose token it is, asked before anything of the delivery is read: why it is refused, or undefined. */
  authenticate(): Promise<AdminRefusal | undefined>;
  /** Whether that sender may do all `actions`: why not, or undefined. Asked after `authenticate`. */
  authorize(actions: readonly EventAction[]): Promise<AdminRefusal | undefined>;
}

/**
 * Senders of events to `POST /snooze/v1/events` who hold no admin token but a token of their own
 * (on Kubernetes, Knative Eventing's OIDC token of a Trigger: kube-event-senders.ts). Who they are
 * is asked first, so a stranger learns nothing of the models and costs no body read; what they may
 * do once the events are read, so a sender may be allowed one model, or only to prewarm.
 */
export interface EventSenders {
  delivery(token: string): SenderCheck;
}
