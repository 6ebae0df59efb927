import type { ModelConfig } from "../lib/settings/index.ts";

/** One engine the platform runs: a process (local) or a pod (Kubernetes). */
export interface ReplicaHandle {
  id: string;
  model: string;
  /** `host:port` where the engine's HTTP server listens. */
  address: string;
}

/**
 * What the control plane asks of wherever engines run. The tier ladder and the
 * slot arbiter sit above it and know nothing of processes or pods.
 */
export interface Platform {
  /** Starts an engine and resolves once it answers `/health`; rejects with the reason it failed. */
  start(model: ModelConfig, signal: AbortSignal): Promise<ReplicaHandle>;
  /** Stops the engine and frees what it held. Idempotent. */
  stop(replica: ReplicaHandle): Promise<void>;
  sleep(replica: ReplicaHandle, level: 1 | 2, timeoutMs: number): Promise<void>;
  wake(replica: ReplicaHandle, fromLevel: 1 | 2, timeoutMs: number): Promise<void>;
  /** Whether the engine is still there (process alive, pod present). */
  alive(replica: ReplicaHandle): boolean;
  /** Called when an engine disappears on its own (crash, OOM kill), with the reason. */
  onExit(listener: (replica: ReplicaHandle, reason: string) => void): void;
  /** Stops every engine it started. */
  close(): Promise<void>;
}
