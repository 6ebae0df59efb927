/**
 * Timers that do not keep the process alive (`unref`), cleared so that they leave nothing behind.
 *
 * Node keeps one timer list per distinct delay. Clearing a timer that is referenced removes its
 * list once empty, but an unreferenced timer's empty list stays until its delay has passed (Node
 * keeps them for HTTP's idle timers, which come back with the same delay). A timer re-armed at a
 * computed delay (a deadline minus now) made a new list at every arming: a model's next decision
 * is re-armed whenever anything changes, and in a slot every change of the busy member's load
 * re-armed the asleep one too, so a busy slot left about one empty list per request, each kept
 * until the asleep member's next step (up to `zeroAfter`), and Snooze's memory grew with its
 * request rate. Referencing the timer just before clearing it lets Node drop the list at once.
 */
export function backgroundTimer(fn: () => void, ms: number): NodeJS.Timeout {
  const timer = setTimeout(fn, ms);
  timer.unref();
  return timer;
}

export function clearBackgroundTimer(timer: NodeJS.Timeout | undefined): void {
  if (!timer) return;
  timer.ref();
  clearTimeout(timer);
}
