/**
 * When a StreamIsActive stream says "true" again without news (KEDA acts on a push once, and may
 * have lost it: external-scaler.ts says why). Pure: the caller's timer ticks every `tickMs` and asks.
 */
export interface RepushPeriods {
  /** While the Model is active and still at spec.replicas 0. */
  zeroRepushMs: number;
  /** While a request is held. */
  repushMs: number;
}

/** The period of the timer that asks repushDue: the shorter of the two. */
export const repushTickMs = (periods: RepushPeriods) => Math.min(periods.zeroRepushMs, periods.repushMs);

/**
 * Whether "true" is due again, `sinceMs` after the last result written. A period counts as come
 * within half a tick of it: the timer fires a millisecond or two either side of the period, and
 * waiting for the next tick instead made the 250 ms repush at zero come after 500 ms now and then.
 */
export function repushDue(
  sample: { active: boolean; atZero: boolean; held: number },
  sinceMs: number,
  periods: RepushPeriods,
): boolean {
  if (!sample.active) return false;
  const slack = repushTickMs(periods) / 2;
  return (
    (sample.atZero && sinceMs + slack >= periods.zeroRepushMs) ||
    (sample.held > 0 && sinceMs + slack >= periods.repushMs)
  );
}
