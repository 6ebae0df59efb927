import { formatDuration } from "../lib/duration.ts";
import { isResident, type ReplicaEvent, sleepTimeoutMs } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { waitGapMs } from "../lib/slot-line.ts";

/** Another member of a model's slot, as the activator knows it: its settings and its latest event. */
export interface SlotPeer {
  config: Pick<ModelConfig, "id" | "slot" | "sleep" | "wakeTimeout"> &
    Partial<Pick<ModelConfig, "startTimeout">>;
  event?: ReplicaEvent;
  /** Requests held for it in this activator. */
  held?: number;
}

/** What a request held for a slot member waits for: another member holding the slot, staying or leaving. */
export interface SlotWait {
  /** Says what it waits for, e.g. "the slot `gpu0`'s resident `a` is still going to sleep (...)". */
  reason: string;
}

/**
 * What a request held for `model` waits for when another member of its slot holds the slot. One
 * staying (ready, or starting or waking for a swap of its own): the slot's policy hands the slot
 * over when it will (a busy resident keeps it up to the slot's maxWait). One leaving (draining,
 * then going to sleep or stopping): a swap waits for it before the model can wake or start; its
 * drain ends at its `endsAt` at the latest, and its sleep call then has `sleepTimeoutMs` (its
 * wakeTimeout, at least 30 s) before its engine is stopped instead. Either way the request's retry
 * is told `slotRetryAfterMs` (activator.ts), not these bounds: the model's wait for its slot runs
 * on only across requests that come again within `waitGapMs`, and a swap that gives it the slot
 * finishes whether or not its requests are still there, so one told to come back later than that
 * lost its turn (the slot went back to a busy member before it came). A pure function of `now`
 * (epoch ms). The model's own engine draining while another member has requests held here is a
 * swap giving that member the slot: the model waits for its turn after it. Undefined when the model
 * has no slot, is resident itself (and not leaving for another member), or no other member is.
 */
export function slotWait(
  model: Pick<ModelConfig, "id" | "slot">,
  peers: Iterable<SlotPeer>,
  now: number,
): SlotWait | undefined {
  if (model.slot === undefined) return undefined;
  const members = [...peers].filter((p) => p.config.slot === model.slot);
  const self = members.find((p) => p.config.id === model.id)?.event;
  if (self?.tier === "draining") return handedOver(model.id, model.slot, members);
  if (self && isResident(self.tier)) return undefined;
  for (const peer of members) {
    const { config, event } = peer;
    if (config.id === model.id || !event || !isResident(event.tier)) continue;
    const slot = `the slot \`${model.slot}\`'s resident \`${config.id}\``;
    if (event.tier !== "draining")
      return {
        reason: `${slot} (${event.tier}) keeps it ${activationLeft(config, event, now)}until the slot's policy hands it over (a busy resident at the latest once this model has waited the slot's maxWait, counted from its first request or wake as long as requests or wakes for it come again within ${formatDuration(waitGapMs)})`,
      };
    const drainEnd = event.endsAt ?? event.since;
    if (!config.sleep) return { reason: `${slot} is still draining and stopping` };
    const timeout = sleepTimeoutMs(config.wakeTimeout);
    if (!Number.isFinite(drainEnd))
      return { reason: `${slot} is still draining before it goes to sleep (its drain has no end set)` };
    // Its sleep call may have begun already (the engine idle before the drain's end): unseen here,
    // so the drain's end is what is known for sure.
    if (now < drainEnd)
      return {
        reason: `${slot} is still draining and going to sleep (its drain ends within ${formatDuration(drainEnd - now)}, and its sleep call may take up to ${formatDuration(timeout)})`,
      };
    // Its drain is over: its sleep call is under way (it may have begun sooner, the engine idle),
    // and is given up at its timeout at the latest, the engine then stopped instead.
    const left = Math.max(0, drainEnd + timeout - now);
    return {
      reason: `${slot} is still going to sleep (its sleep call has run at least ${formatDuration(now - drainEnd)} and is given up within ${formatDuration(left)}, its engine then stopped)`,
    };
  }
  return undefined;
}

/**
 * The model's own engine drains while another member, not resident, has requests held: the slot
 * is being handed to that member (a swap), and the model's requests wait for the slot's policy to
 * hand it back. Found by a probe: such a request was told only its own wake or start estimate, with
 * nothing of the slot; past `waitGapMs`, a client that obeyed it began its wait for the slot anew.
 */
function handedOver(model: string, slot: string, members: SlotPeer[]): SlotWait | undefined {
  const target = members.find(
    (p) => p.config.id !== model && (p.held ?? 0) > 0 && !(p.event && isResident(p.event.tier)),
  );
  if (!target) return undefined;
  return {
    reason: `its own engine drains to give the slot \`${slot}\` to \`${target.config.id}\` (a swap), and it has the slot again once the slot's policy hands it back (at the latest once this model has waited the slot's maxWait, counted from its first request or wake as long as requests or wakes for it come again within ${formatDuration(waitGapMs)})`,
  };
}

/**
 * A resident starting or waking is not interrupted, whatever the slot's maxWait: it keeps the slot
 * until it is ready (then the policy decides) or its activation is given up at its `startTimeout`
 * (`wakeTimeout`). Found by a probe: a request that had waited past maxWait for a member whose start
 * never ended was told only that maxWait bounds its wait.
 */
function activationLeft(config: SlotPeer["config"], event: ReplicaEvent, now: number): string {
  if (event.tier !== "starting" && event.tier !== "waking") return "";
  const verb = event.tier === "starting" ? "start" : "wake";
  const timeout = event.tier === "starting" ? config.startTimeout : config.wakeTimeout;
  const bound =
    timeout !== undefined && Number.isFinite(timeout)
      ? `; it is given up within ${formatDuration(Math.max(0, event.since + timeout - now))}`
      : "";
  return `until its ${verb} under way ends (it is not interrupted, whatever the slot's maxWait${bound}), then `;
}
