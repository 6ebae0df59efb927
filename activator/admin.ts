import type { Tier } from "../lib/replica-event.ts";
import type { SlotStatus } from "../lib/slot-status.ts";

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
  slot?: string;
}

/** What the admin API can ask of the control plane, on a person's request. */
export interface AdminActions {
  wake(model: string): Promise<void>;
  sleep(model: string): Promise<void>;
  stop(model: string): Promise<void>;
  /** Control-plane facts the activator does not know: measured durations, last error, replica ids. */
  details(model: string): Partial<AdminModelView>;
  /** Each slot: its resident, a transition in progress, who waits and for how long. */
  slots(): Promise<SlotStatus[]>;
}
