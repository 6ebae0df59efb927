/**
 * Why a replica's operation ended early without being a failure of the engine: a lost lead, a
 * person's stop or sleep, an engine not up yet, a call with no answer. Thrown inside the operations
 * (replica-*.ts) and told apart by the controller that runs them, so they live below both.
 */

/** This leadership ended while an operation ran: drop it, the next leader decides. */
export class NotLeading extends Error {}
/** A start or wake that no request waits for was stopped by a person while it ran: not a failure. */
export class ActivationStopped extends Error {}
/**
 * A person's sleep came while a start or wake that no request waits for warmed its engine up: the
 * warm-up is given up and the engine sleeps at `level` instead (a warm-up serves the first request,
 * and the next wake has one of its own).
 */
export class SleepInstead extends Error {
  readonly level: 1 | 2;
  constructor(level: 1 | 2) {
    super(`a person's sleep (level ${level}) came during the warm-up`);
    this.level = level;
  }
}
/** A fresh engine that does not answer /health yet: asked again after the back-off, not stopped. */
export class EngineNotUp extends Error {}
/** An engine call that got no answer in its time (read as `timedOut`, as the engine client's errors are). */
export class NoAnswer extends Error {
  readonly timedOut = true;
}
