import type { Context } from "@opentelemetry/api";
import type { LearningState } from "../lib/learning-state.ts";
import type { Tier } from "../lib/replica-event.ts";
import type { SlotStatus } from "../lib/slot-status.ts";

/**
 * A person's sleep or stop that did not happen: a request or a wake after it was asked took the
 * model back (each ends the sleep or stop, as a request always does), or it did not come in its time.
 */
export class AdminActionUnfinished extends Error {
  constructor(verb: "sleep" | "stop", model: string, tier: string, takenBack = false) {
    super(
      takenBack
        ? `The ${verb} of ${model} was taken back: a request (or a wake) came for it after it was asked, so the model stays awake (or is awake again for it); ask again once it is idle.`
        : `The ${verb} of ${model} did not finish in its time: the model is ${tier}.`,
    );
  }
}

/**
 * A person's sleep that ended otherwise: an engine's sleep call failed (an error, or no answer in a
 * wake's time), so it was stopped instead, as an engine in an unknown state must be. The model is
 * cold: no GPU held, but its next request starts it rather than waking it.
 */
export class SleepStoppedInstead extends Error {
  constructor(model: string, reason: string | undefined) {
    super(
      `The sleep of ${model} failed${reason ? ` (${reason})` : ""}; its engine was stopped instead, so the model is cold and its next request starts it.`,
    );
  }
}

/** The next tier change the ladder has planned for a model, if its clock says when. */
export interface NextChange {
  tier: Tier;
  /** ISO time; now or in the past: due at the next look. */
  at: string;
}

/** Accelerator time of one model since this activator started, against keeping it always awake. */
export interface GpuUsage {
  /** Seconds some replica of the model held its accelerator (starting, waking, ready or draining). */
  awakeSeconds: number;
  /** Seconds since Snooze (this activator) started. */
  elapsedSeconds: number;
  /** Always-on minus awake: `elapsed × baseline − awake` (never below 0). */
  savedSeconds: number;
  /** Replicas an always-on deployment would run: 1, or the most seen awake at once. */
  baselineReplicas: number;
}

/** One model as the admin API and `snooze status` show it. */
export interface AdminModelView {
  id: string;
  aliases: string[];
  tier: Tier;
  since: string;
  replicas: { id: string; address?: string; tier: Tier; inFlight?: number }[];
  held: number;
  inFlight: number;
  lastStartMs?: number;
  lastWakeMs?: number;
  lastError?: string;
  /** While the model waits out a back-off after a failed activation: when activations begin again. */
  retryAt?: string;
  slot?: string;
  /**
   * While another member of its slot holds the slot: what the model waits for there, as a request
   * held for it is told (activator/slot-wait.ts), e.g. "the slot `gpu0`'s resident `a` (ready) keeps
   * it until the slot's policy hands it over (...)".
   */
  slotWait?: string;
  /**
   * When the tier changes next on its own (sleep, deeper sleep, stop), when that is known; `null`:
   * the control plane says nothing will until a request (or a prewarm or an operation ends) — the
   * activator's own estimate is then not asked.
   */
  nextChange?: NextChange | null;
  usage?: GpuUsage;
  /** The control plane's GPU-seconds (awake, asleep, saved), prewarms and learned ladder. */
  learning?: LearningState;
}

/**
 * The last reload of the settings file (local mode), when it was refused and no reload applied since:
 * the file on disk is not what runs. `GET /snooze/v1/models` carries it as `reloadFailure`.
 */
export interface ReloadFailure {
  /** When it was refused (ISO time). */
  at: string;
  /** What asked for the reload: `SIGHUP`, or `file changed` (`--watch-config`). */
  cause: string;
  file: string;
  /** What is wrong, one line per problem: `file:line:column: key: reason` (at most `maxReloadProblems`). */
  problems: string[];
}

/** The most problems a ReloadFailure lists; the log has them all. */
export const maxReloadProblems = 20;

/** The last lines an engine printed (stdout and stderr), oldest first. */
export interface EngineLog {
  replica: string;
  lines: string[];
  /** Lines printed since the engine started: a follower asks again with `after=<total>`. */
  total: number;
  /** False for an engine that has exited (its last lines are kept until the next one starts). */
  running: boolean;
  /**
   * The line each of its output streams has begun and not ended yet, if any: what a running engine
   * shows last (a prompt, a progress bar's current state, written after its carriage return). Not
   * counted in `total`: it comes again in `lines` once it has ended.
   */
  unfinished?: string[];
}

/**
 * Who asked for a wake or prewarm, for its trace: the activation it causes continues `caller`'s
 * trace (as a held request's does), or, when its sampler passed over it, links to it.
 */
export interface AskedBy {
  caller?: Context;
}

/** What the admin API can ask of the control plane, on a person's request. */
export interface AdminActions {
  wake(model: string, options?: AskedBy): Promise<void>;
  /**
   * Wakes the model at prewarm priority and keeps it awake for `forMs` within its prewarmBudget
   * (the `dev.snooze.model.prewarm` event); absent: only `wake` is available here. A `hint` (a
   * client listing models) does nothing once the budget is spent, or while a person's sleep or stop
   * holds, where the event still wakes. Resolves with how long the model is kept awake (0: not).
   */
  prewarm?(model: string, forMs: number, options?: { hint?: boolean } & AskedBy): Promise<{ keptMs: number }>;
  /** Resolves once done; rejects with AdminActionUnfinished when it did not happen in its time. */
  sleep(model: string): Promise<void>;
  stop(model: string): Promise<void>;
  /** Control-plane facts the activator does not know: measured durations, last error, replica ids. */
  details(model: string): Partial<AdminModelView>;
  /** Each slot: its resident, a transition in progress, who waits and for how long. */
  slots(): Promise<SlotStatus[]>;
  /** The engines' output, where the platform keeps it (local mode); absent: not available here. */
  logs?(model: string): Promise<EngineLog[]>;
  /** The last reload of the settings file, while it stands refused (local mode); absent: none. */
  reloadFailure?(): ReloadFailure | undefined;
  /** Calls `listener` whenever `reloadFailure` comes or goes; returns what stops it. */
  onReloadFailure?(listener: () => void): () => void;
}
