/**
 * The tier ladder a pass runs for a model: its settings (a person's sleep or stop, else the
 * learned ladder, else the model's own), a prewarm hold that keeps a sleeper asleep as it is, and
 * the prewarm step that wants a replica awake as one more held request. The learner decides; this
 * puts its answers in the terms of a pass. Apart from the controller, which only runs the pass.
 */
import { isAsleep } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import type { ModelControllerDeps } from "./model-controller-api.ts";
import type { ModelLearner } from "./model-learner.ts";
import { mostAwake } from "./model-view.ts";
import type { ReplicaRecord } from "./replica-record.ts";
import { isResident } from "./slot-arbiter.ts";

/** A person's sleep (its level) or stop, while no request is held; undefined otherwise. */
export type Parked = 1 | 2 | "stop" | undefined;

/** What the ladder of a pass reads of a model's controller. */
export interface LadderHost {
  readonly config: ModelConfig;
  readonly learner: ModelLearner;
  readonly deps: Pick<ModelControllerDeps, "slot">;
  readonly records: ReadonlyMap<string, ReplicaRecord>;
  readonly lastActive: number;
  readonly lastStartMs?: number;
  readonly lastWakeMs: { 1?: number; 2?: number };
  readonly backoffUntil: number;
  /** An explicit prewarm asked for a wake, until a replica is ready. */
  readonly prewarmWake: boolean;
  /** Replicas asked for that the platform does not show yet. */
  pendingReplicas(): number;
}

/**
 * The ladder of a pass at `now`: its settings, with a sleeper's stop and deepening put off while a
 * prewarm hold keeps it asleep (`hold.held`), and when that hold wants another look.
 */
export function passLadder(
  c: LadderHost,
  now: number,
  parkedAs: Parked,
): { settings: ModelConfig; hold: { held: 0 | 1; nextAt: number } } {
  const hold = heldAsleep(c, now, parkedAs);
  return { settings: hold.held ? keptAsleep(c, tierSettings(c, parkedAs)) : tierSettings(c, parkedAs), hold };
}

/** The ladder settings of this pass: a person's sleep or stop, else the learned ladder, else the model's. */
export function tierSettings(c: LadderHost, parkedAs: Parked): ModelConfig {
  if (parkedAs === "stop") return { ...c.config, sleep: false };
  if (parkedAs !== undefined) return { ...c.config, sleepLevel: parkedAs };
  return c.learner.ladderSettings(c.config, c.deps.slot !== undefined);
}

/** The prewarm hold at `now`: whether a sleeper is kept asleep as it is (`keptAsleep`), and when to look again. */
function heldAsleep(c: LadderHost, now: number, parkedAs: Parked): { held: 0 | 1; nextAt: number } {
  return c.learner.holdAsleep(now, {
    budgetMs: c.config.prewarmBudget,
    parked: parkedAs !== undefined,
    asleep: [...c.records.values()].some((r) => isAsleep(r.tier)),
  });
}

/** The ladder with a sleeper's stop and deepening put off (a prewarm hold), where the user did not set them. */
function keptAsleep(c: LadderHost, settings: ModelConfig): ModelConfig {
  const explicit = new Set(c.config.explicit ?? []);
  return {
    ...settings,
    ...(explicit.has("deepSleepAfter") ? {} : { deepSleepAfter: Number.POSITIVE_INFINITY }),
    ...(explicit.has("zeroAfter") ? {} : { zeroAfter: Number.POSITIVE_INFINITY }),
  };
}

/**
 * Whether a prewarm wants a replica awake now (begins, goes on, or ends one), as one more held
 * request for the decision; a slot hears when one begins or ends, to grant it at low priority.
 */
export function prewarmStep(
  c: LadderHost,
  now: number,
  load: { inFlight: number; held: number },
  parked: boolean,
  settings: ModelConfig,
): { held: 0 | 1; nextAt: number } {
  const { tier, record } = mostAwake(c.records.values(), c.pendingReplicas());
  const before = c.learner.prewarming;
  const sleepDue =
    tier === "ready" &&
    record !== undefined &&
    !record.busy &&
    now >= Math.max(c.lastActive, record.since) + settings.sleepAfter;
  // The lead only matters with a budget; without one, the learner's estimate (its durations
  // completed on every pass, that is every load change) was a fifth of a pass's time.
  const activation =
    c.config.prewarmBudget <= 0
      ? 0
      : tier === "cold"
        ? (c.lastStartMs ?? c.learner.estimate("start"))
        : tier === "asleep-2"
          ? (c.lastWakeMs[2] ?? c.learner.estimate("wake2"))
          : (c.lastWakeMs[1] ?? c.learner.estimate("wake1"));
  const step = c.learner.step(now, {
    budgetMs: c.config.prewarmBudget,
    resident: isResident(tier),
    sleepDue,
    ready: tier === "ready",
    // Not for a ladder that stops instead of sleeping: the staged replica would stop again at once.
    mayStage: tier === "cold" && settings.sleep && !(c.config.explicit ?? []).includes("zeroAfter"),
    idle: load.inFlight === 0 && load.held === 0,
    parked,
    // Margin for jitter; a slot member may first wait for its slot's resident to sleep.
    leadMs: activation * 1.2 + 5_000 + (c.deps.slot ? 10_000 : 0),
    backoffUntil: c.backoffUntil,
  });
  if (before !== c.learner.prewarming) c.deps.slot?.changed();
  return { held: step.held || c.prewarmWake ? 1 : 0, nextAt: step.nextAt };
}
