import type { ReplicaEvent, Tier } from "../lib/replica-event.ts";
import type { EngineLoad, SleepMode } from "./engine-client.ts";

/** What a platform records of a replica's tier: the tier and what activators elsewhere need with it. */
export type RecordedTier = Pick<ReplicaEvent, "tier" | "since" | "traceparent" | "endsAt" | "unresponsive">;

/**
 * One engine the platform runs: a child process (local) or a pod (Kubernetes). The controller keeps
 * its own record of each replica's tier; these are the platform's facts about it.
 */
export interface Replica {
  /** Process id `qwen-3` or pod name; unique among a model's replicas. */
  id: string;
  /** How messages name it: `pod qwen-7d9f-x2k4` or `engine qwen-3`. */
  label: string;
  /** Tells a replica from a new one of the same id (a pod recreated under its name). */
  uid: string;
  /** `host:port` of the engine's HTTP server, once it has one. */
  address?: string;
  /** The platform sees the engine up: the process answers `/health`, the pod is Ready. */
  up: boolean;
  /**
   * Epoch ms the platform itself saw this engine, a process it started (so awake), answer `/health`
   * (local mode's readiness check). Finishing the start does not ask again what it has just heard.
   */
  answeredAt?: number;
  /** Epoch ms the replica was created (the start of a cold start). */
  createdAt: number;
  /** How often the engine restarted in place (the kubelet's restart count; 0 locally). */
  restarts: number;
  /** The machine it runs on: level-1 sleepers share that machine's host RAM. */
  node: string;
  /** The tier last recorded on the replica (pod annotations), so a new leader starts from it. */
  recorded?: { tier: Tier; since: number };
  /**
   * It runs with engine settings that changed since it started (local mode's config reload of a
   * new command): the controller drains it and stops it, and the next start runs the new ones.
   */
  outdated?: boolean;
  /**
   * The platform knows this replica cannot come up as it is, and why (a human reason): on
   * Kubernetes, a pod that is not Ready whose engine container waits with `ImagePullBackOff`,
   * `CreateContainerConfigError`, `CrashLoopBackOff` and the like, or has exited during its start.
   * A starting replica that is failing has failed its start at once (not at `startTimeout`). Local
   * mode never sets it: an engine that cannot be spawned or exits during its start is told by
   * `StartFailed` or a departure.
   */
  failing?: string;
  /**
   * With `failing`: the failure is the engine's own exit (a crash loop, a termination), not its
   * image or its configuration. Such a crash may be another engine's doing: a slot member started
   * while another member holds the accelerator's memory (a Knative revision's first pod) crashes
   * until the slot is its own, so in a slot it is left to `startTimeout`.
   */
  crashed?: boolean;
}

/** What the platform says of one model's replicas: a replica set. */
export interface ReplicaSetView {
  replicas: Replica[];
  /** The replica count asked of the platform; more than `replicas.length` while some are being made. */
  scale: number;
  /** Whether Snooze may change the count (a Knative Service's pods belong to Knative). */
  scalable: boolean;
  /**
   * A pod whose start failed stays until its startTimeout instead of being scaled away at once: a
   * Knative revision's pod before the revision reached its initial scale (`HorizontalInput.keepFailedStarts`).
   */
  keepFailedStarts?: boolean;
  /**
   * With `keepFailedStarts`: the revision's progress deadline in ms, past which (with a margin) the
   * pod is kept no longer (`HorizontalInput.progressDeadline`).
   */
  progressDeadline?: number;
  /** Label selector of the replicas, for the scale subresource (empty locally). */
  selector: string;
}

/**
 * The engine client's operations the controller uses (vLLM's sleep API and readiness). A call the
 * engine took and did not answer in its time rejects with an error whose `timedOut` is true.
 */
export interface Engine {
  /** Rejects, rather than say false, when this process could not ask (engine-client.ts `isLocalFailure`). */
  healthy(timeoutMs?: number): Promise<boolean>;
  isSleeping(timeoutMs?: number): Promise<boolean>;
  /**
   * `abandon` gives a long call up early (its engine froze, its start was stopped, Snooze shuts
   * down): it rejects at once and its connection is closed, whatever the engine does with it.
   */
  sleep(level: 1 | 2, mode: SleepMode, timeoutMs: number, abandon?: AbortSignal): Promise<void>;
  wake(fromLevel: 1 | 2, timeoutMs: number, abandon?: AbortSignal): Promise<void>;
  warmup(model: string, timeoutMs: number, abandon?: AbortSignal): Promise<void>;
  load(timeoutMs?: number): Promise<EngineLoad>;
  /** The level the engine reports it sleeps at (0: awake); undefined when it does not say. */
  sleepLevel(timeoutMs?: number): Promise<0 | 1 | 2 | undefined>;
}

/** A replica that went away without being asked to, and why (the engine's last words, when known). */
export interface Departure {
  replica: string;
  reason: string;
}

/**
 * A write refused because what it was decided from changed under it (the workload's count moved,
 * the model or pod is gone, or kept changing): decided again at once, from what is there now. Any
 * other failure of a scale is retried after a back-off (autoscaler/replica-scaling.ts).
 */
export class WriteConflict extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WriteConflict";
  }
}

/**
 * A scale-up that could not even begin an engine (local mode: `spawn` itself failed, as for an
 * argument list the system refuses, E2BIG, or no process to be had, EAGAIN): the start failed, as
 * one whose engine exits at once does, rather than a count to decide again. `replica` names the
 * replica it was to be.
 */
export class StartFailed extends Error {
  readonly replica: string;
  constructor(replica: string, message: string) {
    super(message);
    this.name = "StartFailed";
    this.replica = replica;
  }
}

/**
 * Where engines run, shaped like a replica set: the controller reads a model's replicas, scales the
 * model to N (naming the replicas that go first), records each replica's tier, and reaches each
 * engine. Everything above this interface (the ladder, the horizontal decision, slots) is the same
 * on both platforms. Models are named by key: the model id locally, `namespace/name` on Kubernetes.
 */
export interface Platform {
  /** The model's replicas now; undefined while the platform does not know the model's workload. */
  replicaSet(model: string): ReplicaSetView | undefined;
  /**
   * Why the model has no replica set, when that is the user's to fix and not a cache catching up:
   * the workload it names does not exist (a Model's `workloadRef` on Kubernetes). Said in the
   * model's status, and held requests are told it instead of waiting out their hold budget.
   */
  missingWorkload?(model: string): string | undefined;
  /**
   * Scales the model from `expected` to `to` replicas, removing `remove` first when it shrinks.
   * Rejects (and changes nothing) when the count is no longer `expected`: decide again. Rejects
   * with `StartFailed` when an engine it was to start could not be begun (the count stays as it was).
   */
  scale(model: string, expected: number, to: number, remove: readonly Replica[]): Promise<void>;
  /**
   * Records a replica's tier where every activator and a successor see it; `believed` is the tier
   * expected there now. With it go, for starting and waking, the activation's `traceparent` (so
   * activators in other processes link the requests they hold to it) and, for draining, when the
   * drain time is over (`endsAt`).
   */
  recordTier(model: string, replica: Replica, recorded: RecordedTier, believed?: Tier): Promise<void>;
  engine(replica: Replica): Engine;
  /**
   * How long an engine asked to stop (a scale-down) may take at most to be gone: local mode's stop
   * grace, then SIGKILL and a moment for its output to close. Undefined where the platform cannot
   * bound it (a pod's termination is the kubelet's).
   */
  readonly stopWithinMs?: number;
  /**
   * The replica's last lines of output, joined, when the platform keeps them (local mode): a start
   * that timed out says where its engine was, as the departure of one that exited does.
   */
  lastOutput?(model: string, replica: string): string | undefined;
  /** Tells of any change to a model's replicas; a departure says a replica left on its own. */
  onChange(listener: (model: string, departure?: Departure) => void): void;
  /** Stops every engine the platform started (local); releases watches. */
  close(): Promise<void>;
}
