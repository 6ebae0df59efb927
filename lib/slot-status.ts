/** A slot as the admin API, `snooze status` and the Slot object's status show it. */
export interface SlotStatus {
  name: string;
  policy: string;
  members: string[];
  resident?: string;
  transition?: { to: string; from?: string; step: "draining" | "activating"; since: string };
  /** Members waiting for the slot: their held requests, and `wake` while a person's wake waits. */
  waiting: { model: string; held: number; wake?: true; waitingMs: number }[];
  swaps: number;
  lastSwap?: { from: string; to: string; at: string; durationMs: number };
  /** The most residents ever seen at once: the invariant says 1. */
  maxResidents: number;
  /** Seconds the slot's accelerator held a resident, and saved against one always awake. */
  gpuSeconds?: { awake: number; saved: number };
}

/** `status` with every member named by `rename` (its members, resident, transition, waiting and last swap). */
export function renameMembers(status: SlotStatus, rename: (member: string) => string): SlotStatus {
  const { transition: t, lastSwap } = status;
  return {
    ...status,
    members: status.members.map(rename),
    ...(status.resident !== undefined ? { resident: rename(status.resident) } : {}),
    ...(t ? { transition: { ...t, to: rename(t.to), ...(t.from ? { from: rename(t.from) } : {}) } } : {}),
    waiting: status.waiting.map((w) => ({ ...w, model: rename(w.model) })),
    ...(lastSwap ? { lastSwap: { ...lastSwap, from: rename(lastSwap.from), to: rename(lastSwap.to) } } : {}),
  };
}
