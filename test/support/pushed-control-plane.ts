import type { ControlPlane } from "../../lib/control-plane.ts";
import type { ReplicaEvent } from "../../lib/replica-event.ts";

/**
 * The activator's side of the seam for its unit tests: the demand it signals is recorded, and the
 * test pushes the replica events a real control plane would (models appearing, waking, going).
 */
export class PushedControlPlane implements ControlPlane {
  readonly demanded: string[] = [];
  /** Every watcher: the activator's routes, and the status page's timeline. */
  private readonly listeners = new Set<(event: ReplicaEvent) => void>();

  demand(model: string): void {
    this.demanded.push(model);
  }

  stats(): void {}

  watch(listener: (event: ReplicaEvent) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  emit(event: ReplicaEvent): void {
    for (const listener of this.listeners) listener(event);
  }
}
