/**
 * What others see of a model's replicas, as pure functions of the records: the model's tier (its
 * most awake replica, as activators see it), a replica's event, and the ladder's next planned
 * change. The controller's status, state and events are built from these; kept apart so the
 * projections are read, and tested, without the actor.
 */
import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { traceContextOf } from "../lib/tracing.ts";
import type { LadderAction } from "./ladder.ts";
import type { ReplicaRecord } from "./replica-record.ts";
import { isResident } from "./slot-arbiter.ts";

const order: Tier[] = ["ready", "waking", "starting", "draining", "asleep-1", "asleep-2"];

/**
 * The model's tier: its most awake replica's, as the activators see it (`visibleTier`); replicas
 * asked for and not there yet count as starting.
 */
export function mostAwake(
  records: Iterable<ReplicaRecord>,
  pending: number,
): { tier: Tier; record?: ReplicaRecord } {
  let best: ReplicaRecord | undefined;
  for (const record of records) {
    // A tier is only left once the platform says so too: until the record lands, activators
    // still see the old tier, so a replica leaving the slot counts as resident a little longer.
    const tier = visibleTier(record);
    if (!best || order.indexOf(tier) < order.indexOf(visibleTier(best))) best = record;
  }
  const tier = best ? visibleTier(best) : "cold";
  if (pending > 0 && tier !== "ready" && tier !== "waking") return { tier: "starting", record: best };
  return { tier, record: best };
}

/** A replica's tier as activators see it: a resident one stays resident until its move is recorded. */
function visibleTier(record: ReplicaRecord): Tier {
  const { recorded, tier } = record;
  return recorded !== undefined && isResident(recorded) && !isResident(tier) ? recorded : tier;
}

/**
 * A replica's event as activators and CloudEvents see it: its tier with what goes with it (the
 * activation's trace while starting or waking, a drain's end, the engine's exit when it went cold,
 * a failure with the back-off's end).
 */
export function replicaEvent(
  model: string,
  backoffUntil: number,
  record: ReplicaRecord,
  estimateMs?: number,
  error?: string,
  exit?: string,
): ReplicaEvent {
  const activation = record.tier === "starting" || record.tier === "waking" ? record.activation : undefined;
  return {
    model,
    replica: record.replica.id,
    ...(record.tier !== "cold" && record.replica.address ? { address: record.replica.address } : {}),
    tier: record.tier,
    since: record.since,
    ...(estimateMs !== undefined ? { estimateMs } : {}),
    ...(error !== undefined ? { error, retryAt: backoffUntil } : {}),
    ...(activation ? traceContextOf(activation.span) : {}),
    ...(record.tier === "draining" && record.drainEndsAt !== undefined ? { endsAt: record.drainEndsAt } : {}),
    ...(record.tier === "draining" && record.unresponsive ? { unresponsive: true as const } : {}),
    ...(record.tier !== "cold" && record.goneBy !== undefined ? { goneBy: record.goneBy } : {}),
    ...(record.tier === "cold" && exit !== undefined ? { exit } : {}),
  };
}

/**
 * The next tier change the ladder's `action` plans for a model's most awake replica: now for an
 * action due, at its time for a wait; undefined when only a request would change it. A slot member
 * (`inSlot`) does not sleep deeper: it stops.
 */
export function plannedChange(
  action: LadderAction,
  record: ReplicaRecord,
  settings: ModelConfig,
  inSlot: boolean,
  now: number,
): { tier: Tier; at: number } | undefined {
  const asleep = `asleep-${settings.sleepLevel}` as const;
  // A slot member does not sleep deeper: its accelerator may hold another resident, so it stops.
  const deeper: Tier = inSlot ? "cold" : "asleep-2";
  switch (action.kind) {
    case "drain-and-sleep":
      return { tier: `asleep-${action.level}`, at: now };
    case "drain-and-stop":
    case "stop":
      return { tier: "cold", at: now };
    case "deepen":
      return { tier: deeper, at: now };
    case "wait": {
      if (!Number.isFinite(action.at)) return undefined;
      if (record.tier === "ready") return { tier: settings.sleep ? asleep : "cold", at: action.at };
      if (record.tier === "asleep-1" && action.at < record.asleepSince + settings.zeroAfter)
        return { tier: deeper, at: action.at };
      return { tier: "cold", at: action.at };
    }
    default:
      return undefined;
  }
}
