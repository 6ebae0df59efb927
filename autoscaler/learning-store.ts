import type { LearningSnapshot } from "../lib/learning-snapshot.ts";

/**
 * Where what each model learned (its `LearningSnapshot`) is kept across restarts: local mode's
 * state file. On Kubernetes the Model's status keeps it instead (written with the status).
 */
export interface LearningStore {
  /** Where it is kept, for log lines. */
  readonly source: string;
  /** What was kept for a model (by key), not yet checked; undefined when nothing was. */
  load(key: string): unknown;
  /** Keeps every model's snapshot at once. */
  save(snapshots: ReadonlyMap<string, LearningSnapshot>): void;
}
