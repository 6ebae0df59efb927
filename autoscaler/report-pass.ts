/**
 * Whether one activator's stats report needs a decision pass of its model's controller (issue 14).
 *
 * Activators report every model's load every second. A pass on each one allocated 7–10 KiB per
 * model per report, about 0.5 MB/s for 50 idle models, and an idle `snooze serve` grew with it. A
 * report can only change a decision through what the controller holds; time changes decisions too,
 * and the pass arms a timer (`nextAt`) for every moment at which one is due. So a report that
 * repeats an idle one (nothing in flight, nothing held, before and now), or one that only says
 * requests are in flight or done (last bullet), needs no pass, as long as that timer does cover
 * every time-dependent part of the model's decisions:
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
 * - nothing held, before or now, and the last pass decided on an idle load: requests in flight
 *   alone change no decision at once. With nothing held, every request in flight has room on an
 *   awake replica (the throttler holds the rest), so none asks for more replicas; and busy only
 *   moves the idle clock later, so the timer armed for the idle load comes first (the pass it
 *   brings reads the load then). A model answering one request at a time reports busy and idle
 *   twice a request: a pass on each cost the warm path about a tenth of its CPU. When the last
 *   pass saw requests in flight, a report passes: that pass armed no idle clock.
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
  /** The last pass saw nothing in flight and nothing held, from every activator. */
  decidedIdle: boolean;
}

export function reportNeedsPass(input: ReportPassInput): boolean {
  const { before } = input;
  if (!input.atRest || !input.timerCoversTime || before === undefined) return true;
  if (input.windowed || before.reports !== undefined) return true;
  if (before.held > 0 || input.held > 0) return true;
  const idleBefore = before.inFlight === 0;
  const idleNow = input.inFlight === 0;
  if (idleBefore && idleNow) return false;
  return !input.decidedIdle;
}
