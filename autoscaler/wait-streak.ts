import { waitGapMs } from "../lib/slot-line.ts";

/**
 * How long a slot member has wanted the slot, across its requests. The age of the oldest request
 * held alone starts again whenever that request leaves: with a `holdBudget` shorter than the slot's
 * `maxWait`, each request timed out before the member had waited `maxWait`, its retry began a new
 * wait, and a member whose clients kept asking never took the slot from a busy resident (found by
 * an outside tester). So a member's wait runs from its first request for as long as requests keep
 * coming, and ends only after a pause in them.
 */

export interface WaitStreak {
  /** When the wait began (epoch ms): the oldest request of the streak. */
  since: number;
  /** When requests were last seen held (epoch ms). */
  seen: number;
}

/**
 * The streak after a look at the member's held requests at `now`: `heldSince`, the oldest held now
 * (undefined when none is held). A request that came within `waitGapMs` of the last seen held one
 * goes on with the streak; a longer pause ends it.
 */
export function nextStreak(
  streak: WaitStreak | undefined,
  heldSince: number | undefined,
  now: number,
): WaitStreak | undefined {
  if (heldSince === undefined) return streak && now - streak.seen <= waitGapMs ? streak : undefined;
  if (!streak || heldSince - streak.seen > waitGapMs) return { since: heldSince, seen: now };
  return { since: Math.min(streak.since, heldSince), seen: now };
}
