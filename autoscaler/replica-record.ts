/**
 * One replica as a model's controller knows it, and the activation (a start or a wake) traced on it.
 * Shared by the controller and the operations it runs on each replica (replica-*.ts), which read
 * and move the same record: kept apart so that those import the record, not the controller.
 */
import type { Context, Span } from "@opentelemetry/api";
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import type { Replica } from "./platform.ts";

/** How long a replica rests after a failed operation before the next one may start on it. */
export const failedOperationCoolMs = 1_000;

/** One replica as the controller knows it. */
export interface ReplicaRecord {
  replica: Replica;
  tier: Tier;
  since: number;
  asleepSince: number;
  /** The tier recorded on the platform (what the next conditional write expects to find). */
  recorded?: Tier;
  /** An operation runs on it: no second one starts. */
  busy: boolean;
  /**
   * An operation on it was cut short by a moment without the Lease's renewal (the API server away)
   * while this replica went on leading: where its engine is gets found out again (`recheck`) at the
   * next pass that holds the Lease, or a wake cut so would leave it `waking` for good.
   */
  interrupted?: boolean;
  /** A sleep or stop is under way: a returning request can no longer take it back. */
  leaving: boolean;
  /**
   * It drains to be replaced (its engine settings changed): a reload that gives back the settings
   * it runs takes it back, until the drain is over.
   */
  restarting?: boolean;
  /** The workload's count when a scale-down that named it went through: it goes when its pod does. */
  removedFrom?: number;
  /** No new operation before this moment (after a failed one). */
  coolUntil: number;
  restarts: number;
  /** Tier records run in order, one at a time. */
  writes: Promise<unknown>;
  /**
   * The last tier told (its event) while its write has not gone through: a write the platform
   * refused is made again (`tierWriteFailed`) for as long as it is still the last.
   */
  unwritten?: ReplicaEvent;
  /** The activation this replica's start or wake belongs to. */
  activation?: Activation;
  /** It left on its own, in the platform's words (an engine's exit code and last lines). */
  departed?: string;
  /**
   * Its wake call found nothing listening: the engine died asleep (its exit not seen yet), and the
   * wake never reached it. When it is found gone, that is a crash, not a failed wake.
   */
  diedAsleep?: boolean;
  /**
   * Whether the wake under way has made its call to the engine: false from its start until then
   * (its waking tier is written first: a disk, an API server's patch). An engine found gone before
   * the call was never asked to wake: it died asleep, a crash, not a failed wake.
   */
  wakeCalled?: boolean;
  /** Replaced for failing its re-check, in a crash loop: why, for the requests held when it is gone. */
  crashLoop?: string;
  /** Its start failed and it is still there (see `ReplicaView.startFailed`); a restart in place clears it. */
  startFailed?: boolean;
  /**
   * Gives up the long engine calls under way on this replica (a warm-up, a wake, a sleep): its
   * start was stopped, or Snooze stops acting. Made by the first such call, dropped once used.
   */
  calls?: AbortController;
  /** Gives up the warm-up under way on this replica (a person's sleep: see `SleepInstead`). */
  warmUpCall?: AbortController;
  /** The host-memory budget asked for a deeper sleep while an operation ran. */
  demote?: boolean;
  /**
   * A deeper sleep could not be asked (this process was short of file descriptors): the host-memory
   * budget, which may have asked for it, is asked again once the cool-down is over.
   */
  budgetAgain?: boolean;
  /** While it drains: when the drain time is over (activators end what still runs then). */
  drainEndsAt?: number;
  /** It drains because its engine stopped answering (activators tell the clients so). */
  unresponsive?: true;
  /** Its engine is being stopped: when it is gone at the latest (`ReplicaEvent.goneBy`). */
  goneBy?: number;
  /**
   * The context of the operation that stopped it (a failed start's or wake's activation, a
   * release's drain): the line of its going cold, which comes when the platform sees it gone, is
   * that operation's too.
   */
  stoppedIn?: Context;
}

/** One start or wake, traced from the decision to the first routable moment. */
export interface Activation {
  kind: "start" | "wake";
  from: Tier;
  span: Span;
  context: Context;
  started: number;
  /** For a start: the time until the platform has the engine up. */
  startSpan?: Span;
}
