/** How many of a run of drops there were, by type. */
export interface OverflowRun {
  count: number;
  types: Record<string, number>;
}

/**
 * The events a full queue dropped, from the first drop until one fits again: what lets a sink say a
 * loss in two log lines (as the queue fills, and the count once it has room) rather than one per
 * event, or none (each drop was only counted, and said at debug level).
 */
export class QueueOverflow {
  private run: OverflowRun | undefined;

  /** Counts a drop; true for the first of a run, which the caller says at once. */
  drop(type: string): boolean {
    const first = this.run === undefined;
    this.run ??= { count: 0, types: {} };
    this.run.count++;
    this.run.types[type] = (this.run.types[type] ?? 0) + 1;
    return first;
  }

  /** Ends the run (an event fitted, or the queue closed): its drops, or undefined if there were none. */
  end(): OverflowRun | undefined {
    const run = this.run;
    this.run = undefined;
    return run;
  }
}
