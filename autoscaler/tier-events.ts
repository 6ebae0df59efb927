import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";

/**
 * Which tier changes become CloudEvents (types under `dev.snooze.`), so a
 * Knative Broker or any sink can react to a model waking, sleeping or failing.
 */
export function cloudEventFor(
  from: Tier,
  event: ReplicaEvent,
): { type: string; data: Record<string, unknown> } | undefined {
  const data = { model: event.model, replica: event.replica, from, to: event.tier, address: event.address };
  if (event.error) return { type: "dev.snooze.activation.failed", data: { ...data, reason: event.error } };
  if (from === event.tier) return undefined;
  if (event.tier === "ready" && from === "starting") return { type: "dev.snooze.replica.started", data };
  if (event.tier === "ready" && from === "waking") return { type: "dev.snooze.replica.woke", data };
  if (event.tier === "asleep-1" || event.tier === "asleep-2") {
    return { type: "dev.snooze.replica.slept", data: { ...data, level: event.tier === "asleep-1" ? 1 : 2 } };
  }
  if (event.tier === "cold") return { type: "dev.snooze.replica.stopped", data };
  return undefined;
}
