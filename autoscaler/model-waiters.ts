/**
 * The waits on one model's controller: a person's wake, sleep or stop waiting for the model to be
 * as asked, an operation waiting for an engine's exit to be seen, a drain's pause. Each looks again
 * whenever the controller says something changed (`wake`), and ends at its timeout on the
 * controller's clock; kept apart from the controller, which owns it and calls `wake`.
 */
import type { Clock } from "../lib/clock.ts";

export class ModelWaiters {
  private readonly waiting = new Set<() => void>();
  private readonly clock: Clock;
  /** Whether waits go on: false once the controller closed or lost its lead. */
  private readonly live: () => boolean;

  constructor(clock: Clock, live: () => boolean) {
    this.clock = clock;
    this.live = live;
  }

  /** Something changed: every wait looks again. */
  wake(): void {
    for (const settle of this.waiting) settle();
  }

  /**
   * Resolves true once `done`; false when `timeoutMs` passed first, the model closed or lost its
   * lead, or `overtaken` says it will not be done (a request took back what was asked).
   */
  settle(done: () => boolean, timeoutMs: number, overtaken?: () => boolean): Promise<boolean> {
    return new Promise<boolean>((resolve) => {
      let timer: { cancel(): void } | undefined;
      const check = () => {
        const finished = done();
        if (!finished && this.live() && !overtaken?.()) return;
        timer?.cancel();
        this.waiting.delete(check);
        resolve(finished);
      };
      timer = this.clock.setTimeout(() => {
        this.waiting.delete(check);
        resolve(done());
      }, timeoutMs);
      this.waiting.add(check);
      queueMicrotask(check);
    });
  }

  /** Waits on the controller's clock; anything that changes (a stats report) ends the wait early. */
  pause(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const done = () => {
        timer.cancel();
        this.waiting.delete(done);
        resolve();
      };
      const timer = this.clock.setTimeout(done, Math.max(1, ms));
      this.waiting.add(done);
    });
  }
}
