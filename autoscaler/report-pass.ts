/**
 * Whether one activator's stats report needs a decision pass of its model's controller (issue 14).
 *
 * Activators report every model's load every second. A pass on each one allocated 7–10 KiB per
 * model per report, about 0.5 MB/s for 50 idle models, and an idle `snooze serve` grew with it. A
 * report can only change a decision through what the controller holds; time changes decisions too,
 * and the pass arms a timer (`nextAt`) for every moment at which one is due. So a report that
 * repeats an idle one (nothing in flight, nothing held, before and now) needs no pass, as long as
 * that timer does cover every time-dependent part of the model's decisions:
 *
 * - `atRest`: the last pass ran to its end and armed its timer, nothing changed since, and nothing
 *   is under way (no operation, scale or start pending, no admin wake wanted). A pass that
 *   returned early (not holding its Lease, no replica set yet) armed no timer: reports still pass.
 * - `timerCoversTime`: the controller's own timer is all there is. Not so for a slot member (its
 *   slot decides, over all members), for a controller whose passes publish a status (the Model's
 *   status on Kubernetes carries a learning snapshot refreshed by time, at a pass), or for a
 *   model that learns (`wakeTarget`, `prewarmBudget`: its plans move with the history's exposure,
 *   which every report advances, and are looked at again at each pass, not at a timer).
 * - the report carries no running totals (`flow`) and the last one carried none: a report window
 *   for the demand metric is something the controller holds, and it changes with every report.
 *
 * Pure: what the controller holds and the report in, the answer out.
 */
export interface ReportPassInput {
  /**
   * What the controller held from this activator before the report (with its report window, if
   * any); undefined: its first report.
   */
  before?: { inFlight: number; held: number; reports?: readonly unknown[] };
  inFlight: number;
  held: number;
  /** The report carries running totals (`flow`). */
  windowed: boolean;
  atRest: boolean;
  timerCoversTime: boolean;
}

export function reportNeedsPass(input: ReportPassInput): boolean {
  const { before } = input;
  if (!input.atRest || !input.timerCoversTime || before === undefined) return true;
  if (input.windowed || before.reports !== undefined) return true;
  const idleBefore = before.inFlight === 0 && before.held === 0;
  const idleNow = input.inFlight === 0 && input.held === 0;
  return !(idleBefore && idleNow);
}
