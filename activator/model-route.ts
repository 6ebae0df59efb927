import { backgroundTimer, clearBackgroundTimer } from "../lib/background-timer.ts";
import type { Flow } from "../lib/control-plane.ts";
import { formatDuration, timerValue } from "../lib/duration.ts";
import { keepNewest } from "../lib/keep-newest.ts";
import { LinkedSet } from "../lib/linked-set.ts";
import { isWarming, mostAwake, type ReplicaEvent, type Tier } from "../lib/replica-event.ts";
import type { ModelConfig } from "../lib/settings/index.ts";
import { type Pool, undici } from "../lib/undici.ts";
import { type Held, HoldQueue } from "./hold-queue.ts";
import { SpareConnections } from "./spare-connections.ts";

/** A replica as the activator sees it: where it is, whether it takes traffic, how busy it is. */
export interface Backend {
  replica: string;
  address: string;
  tier: Tier;
  inFlight: number;
  pool: Pool;
  /** Connections opened while the replica wakes, for the requests held for it (`pool` takes them first). */
  spares: SpareConnections;
  /** Connections `pool` may open: requests to this replica beyond it wait in the hold queue. */
  connections: number;
  /**
   * Pools a reload replaced (`reconfigure`: another `concurrency` or `maxConnections`), each until
   * the requests sent through it have finished.
   */
  retiredPools: Set<Pool>;
  /**
   * A connection to it failed before any answer: not routable until its engine answers `/health`
   * (`probe`) or the control plane reports on it again.
   */
  suspect: boolean;
  /** A probe of it is under way. */
  probing?: boolean;
  /**
   * How to end each forward in flight to it, for when its drain time is over; told whether the
   * drain is because its engine stopped answering.
   */
  drainEnds: LinkedSet<(unresponsive: boolean) => void>;
  /** While it drains: fires at the drain's end (`ReplicaEvent.endsAt`). */
  drainTimer?: NodeJS.Timeout;
}

/** Why a held request was not dispatched. */
export type HoldFailure =
  | { reason: "budget"; retryAfterMs: number; busy?: boolean }
  | { reason: "queue-full"; retryAfterMs: number }
  | { reason: "activation-failed"; retryAfterMs: number; message: string }
  | { reason: "shutdown"; retryAfterMs: number }
  /** The model was removed (its Model deleted) while the request was held: nothing will serve it here. */
  | { reason: "removed"; retryAfterMs: number }
  /** The client went away while held. */
  | { reason: "abandoned"; retryAfterMs: number }
  /** The replica the request was pinned to went away (stopped, or replaced by another engine). */
  | { reason: "replica-gone"; retryAfterMs: number };

interface Waiter {
  resolve(backend: Backend): void;
  reject(failure: HoldFailure): void;
  /** The one replica it may go to (`hold`'s `pin`), if any. */
  pin?: string;
}

export interface RouteListener {
  /** The first request was held while nothing could take it: the control plane must act. */
  demand(model: string, unreachable?: string): void;
  /** In-flight or held went to or from zero (the control plane's idle clock), or changed while draining. */
  loadChanged(model: string): void;
}

const minRetryAfterMs = 1_000;

/** How long a suspect replica's engine has to answer `/health` (`probe`). */
const probeTimeoutMs = 2_000;

/** Exits of replicas kept for requests their engines failed under: only the latest few matter. */
const keptExits = 16;

/**
 * What a start or wake is taken to last before one was measured (a model's first): a client told to
 * come back in a second ran out of its retries (the openai client's two, 2 s in all) long before a
 * first start of a few seconds ended (found by an outside tester). vLLM's own starts take tens of
 * seconds; a wake from level 1 a few.
 */
export const unmeasuredMs = { start: 10_000, wake: 2_000 };

/**
 * Held requests released in one turn of the event loop; the rest follow in the next turns. Released
 * all in one loop, 1,000 held requests were each forwarded (≈ 50 µs of CPU apiece) before the first
 * one's bytes left, and reached the engine as one herd of connections it parsed before answering
 * any: the first answer came ≈ 280 ms after the engine was ready. In waves the first requests go out
 * and are answered while later waves are still being sent. A pace, not a gate: every wave goes one
 * turn after the last whatever the engine does, so long streams never hold back the ones behind.
 */
export const releaseWave = 16;

/**
 * The waves of a release start at one request and double up to releaseWave: the first held
 * request reaches the engine alone, a turn ahead of the next ones, so the engine answers it before
 * it parses a herd. Measured with 1,000 held (`BENCH_HELD=1000 npm run bench -- --quick --only
 * activation --no-write`, six runs beside six of a checkout with waves of 16 from the first): the
 * first byte after a wake 5.1 ms median against 11.9 (lower in 6 of 6 pairs), after a cold start
 * 10.9 against 14.6 (5 of 6), the last answer no later (0.98× against 1.02× the engine's own).
 */
export const firstWave = 1;

/**
 * Connections opened to a waking replica ahead of the release, at most: one per held request up to
 * four waves. The first waves are what the first answers wait for; by the time later waves go, the
 * first ones' connections are free again or the engine is accepting new ones between answers.
 */
export const spareLimit = 4 * releaseWave;

/**
 * One model's traffic: its replicas (Knative's revision backends), the
 * capacity of each (the throttler) and the queue of held requests. Requests
 * leave the queue in arrival order as capacity appears.
 */
export class ModelRoute {
  readonly config: ModelConfig;
  /** When this activator began to route the model (epoch ms): at its start, or when a reload added it. */
  readonly addedAt = Date.now();
  private readonly backends = new Map<string, Backend>();
  private readonly queue: HoldQueue<Waiter>;
  /** Held requests that may go to one replica only (`hold`'s `pin`). */
  private pinnedHeld = 0;
  private readonly listener: RouteListener;
  private lastEvent?: ReplicaEvent;
  /**
   * The back-off after the model's last failed activation, as the control plane announced it. A
   * fact of the model, not of one replica: the replica events that follow (on Kubernetes, the failed
   * pod's own, which may still say starting) do not end it. A replica ready or activating that did
   * not fail with it (`failed`: those activating when it came) does, while it lasts; so does the
   * control plane's word that it is over (a reload changed the engine, a person stopped the model).
   */
  private failure?: { error: string; retryAt: number; failed: Set<string> };
  /** The estimates the last start and the last wake were announced with: the next one's likely time. */
  private readonly estimates: { start?: number; wake?: number } = {};
  /** The last few activations and swaps announced for this model (a swap, then the wake it runs). */
  private readonly announced: { traceparent: string; at: number }[] = [];
  private inFlightTotal = 0;
  private lastActiveAt?: number;
  /** Running totals reported to the control plane (lib/control-plane.ts Flow). */
  private readonly totals: Flow = { arrived: 0, completed: 0, serviceMs: 0 };
  /** The next wave of held requests is due on the next turn (see `releaseWave`). */
  private waveDue = false;
  /** The size of the next wave: firstWave when a release begins, doubling up to releaseWave. */
  private wave = firstWave;
  /** How the last few replicas that went on their own went (`ReplicaEvent.exit`), by replica. */
  private readonly exits = new Map<string, string>();
  /** Calls waiting to hear what became of a replica (`exitOf`), told of every event. */
  private readonly fateWaiters = new Set<() => void>();
  /** Closed (`close`): its model was removed, or Snooze shuts down; it holds no request any more. */
  /** Closed, and why: held requests and any held after are answered so (`close`). */
  private closed?: "shutdown" | "removed";

  constructor(config: ModelConfig, listener: RouteListener) {
    this.config = config;
    this.listener = listener;
    this.queue = new HoldQueue(config.queueDepth, config.holdBudget, (item) => this.expired(item));
  }

  get inFlight(): number {
    return this.inFlightTotal;
  }

  get held(): number {
    return this.queue.length;
  }

  /** The last moment this activator had work for the model (a request held, taken or finished), epoch ms. */
  get lastActive(): number | undefined {
    return this.inFlightTotal > 0 || this.queue.length > 0 ? Date.now() : this.lastActiveAt;
  }

  /** Running totals since this route was made: arrivals, answers and their service time. */
  get flow(): Flow {
    return { ...this.totals };
  }

  /** A request for this model arrived (before it is sent or held). */
  arrived(): void {
    this.totals.arrived++;
  }

  /** An engine answered a request in `serviceMs` (dispatch to last byte, the hold not included). */
  completed(serviceMs: number): void {
    this.totals.completed++;
    this.totals.serviceMs += Math.max(0, serviceMs);
  }

  /** How long the oldest held request has waited, or undefined when none is held. */
  oldestHeldMs(): number | undefined {
    const oldest = this.queue.peek();
    return oldest ? performance.now() - oldest.enqueuedAt : undefined;
  }

  /**
   * The replicas some held requests may go to alone (`hold`'s `pin`): the control plane wakes each
   * one that sleeps, since no other replica can serve them. Undefined when none is (no scan then).
   */
  pinnedTo(): string[] | undefined {
    if (this.pinnedHeld === 0) return undefined;
    const replicas = new Set<string>();
    for (const waiter of this.queue.values()) if (waiter.pin !== undefined) replicas.add(waiter.pin);
    return [...replicas];
  }

  /** The model's tier as the activator knows it (the most awake replica's). */
  get tier(): Tier {
    if (this.backends.size === 0) return this.lastEvent?.tier ?? "cold";
    return mostAwake([...this.backends.values()].map((b) => b.tier));
  }

  /** Every replica the activator knows for this model, with its tier and load. */
  replicas(): { id: string; address: string; tier: Tier; inFlight: number }[] {
    return [...this.backends.values()].map((b) => ({
      id: b.replica,
      address: b.address,
      tier: b.tier,
      inFlight: b.inFlight,
    }));
  }

  /** The replicas requests go to now (ready), as this activator sees them: what its reports name. */
  routed(): string[] {
    const out: string[] = [];
    for (const backend of this.backends.values()) if (backend.tier === "ready") out.push(backend.replica);
    return out;
  }

  get latestEvent(): ReplicaEvent | undefined {
    return this.lastEvent;
  }

  /** The trace context of the latest activation or swap, and when it was announced (ms, performance clock). */
  get latestActivation(): { traceparent: string; at: number } | undefined {
    return this.announced.at(-1);
  }

  /** Activations and swaps announced since `since` (performance clock), oldest first. */
  activationsSince(since: number): { traceparent: string; at: number }[] {
    return this.announced.filter((a) => a.at >= since);
  }

  /** Requests one replica takes at once: `concurrency` (0 is unlimited), never more than `maxConnections`. */
  private get perReplica(): number {
    const { concurrency, maxConnections } = this.config;
    return concurrency > 0 ? Math.min(concurrency, maxConnections) : maxConnections;
  }

  /**
   * A ready replica with free capacity for a request that just arrived, counted as taken; undefined
   * when none, or when earlier requests are still held (they go first, in arrival order).
   */
  tryAcquire(pin?: string): Backend | undefined {
    // Requests held for one replica wait for that one alone, which has no room (else they would
    // have gone): they hold back no request for another.
    return this.queue.length > this.pinnedHeld ? undefined : this.acquire(pin);
  }

  /** `acquire` without taking it: the replica a request (for `pin` alone, if given) would go to. */
  private available(pin?: string): Backend | undefined {
    const limit = this.perReplica;
    if (pin !== undefined) {
      const backend = this.backends.get(pin);
      return backend && hasRoom(backend, limit) ? backend : undefined;
    }
    let chosen: Backend | undefined;
    for (const backend of this.backends.values())
      if (hasRoom(backend, limit) && (!chosen || backend.inFlight < chosen.inFlight)) chosen = backend;
    return chosen;
  }

  private acquire(pin?: string): Backend | undefined {
    const chosen = this.available(pin);
    if (chosen) this.taken(chosen);
    return chosen;
  }

  /** Waits for capacity within the hold budget. Resolves with a backend already counted as taken. */
  /**
   * Holds a request until a replica has room. `resend`: one its engine failed under, sent again;
   * it had its place already, so a full queue does not refuse it (found by an outside tester:
   * requests on an engine that died were told `queue_full`). `pin`: the one replica it may go to
   * (one whose engine keeps what it asks for, a stored response); refused with `replica-gone` when
   * that replica is not, or no longer, there.
   */
  hold(resend = false, pin?: string): { promise: Promise<Backend>; cancel(): void } {
    let waiter!: Waiter;
    const promise = new Promise<Backend>((resolve, reject) => {
      waiter = { resolve, reject, ...(pin !== undefined ? { pin } : {}) };
    });
    if (pin !== undefined && !this.backends.has(pin)) {
      waiter.reject({ reason: "replica-gone", retryAfterMs: 0 });
      return { promise, cancel() {} };
    }
    // Closed (its model removed): a request sent again after its engine failed under it is answered
    // as the held ones were, at once; nothing would ever serve it here (found by an outside tester:
    // it waited out its whole hold budget, then heard the model was busy).
    if (this.closed) {
      waiter.reject({ reason: this.closed, retryAfterMs: this.retryAfterMs() });
      return { promise, cancel() {} };
    }
    const backedOff = this.backedOff();
    if (backedOff) {
      waiter.reject(backedOff);
      return { promise, cancel() {} };
    }
    const item = this.queue.push(waiter, performance.now(), resend);
    if (!item) {
      waiter.reject({ reason: "queue-full", retryAfterMs: this.retryAfterMs() });
      return { promise, cancel() {} };
    }
    if (pin !== undefined) this.pinnedHeld++;
    this.lastActiveAt = Date.now();
    if (this.queue.length === 1) this.listener.loadChanged(this.config.id);
    this.listener.demand(this.config.id);
    this.connectAhead();
    for (const backend of this.backends.values()) if (backend.suspect) this.probe(backend);
    return {
      promise,
      cancel: () => {
        if (!this.queue.remove(item)) return;
        this.left(item);
        waiter.reject({ reason: "abandoned", retryAfterMs: 0 });
        if (this.queue.length === 0) this.listener.loadChanged(this.config.id);
      },
    };
  }

  /**
   * The model's last activation failed and it waits out a back-off that leaves a request no time to
   * be served within its hold budget (the back-off left and the next activation's last measured
   * time, at least a second, reach the budget): it is told so at once, with the reason and the back-off left,
   * rather than held for its whole budget and told to retry in a second (found by outside testers).
   */
  private backedOff(): HoldFailure | undefined {
    const backoff = this.backoff();
    if (!backoff) return undefined;
    const left = backoff.retryAt - Date.now();
    const next = Math.max(
      minRetryAfterMs,
      (this.lastEvent?.tier === "cold" ? this.estimates.start : this.estimates.wake) ?? 0,
    );
    if (left + next < this.config.holdBudget) return undefined;
    return { reason: "activation-failed", message: backoff.error, retryAfterMs: left };
  }

  /**
   * The back-off the model waits out after its last activation failed: when activations begin
   * again, and why it failed. Undefined when there is none left, or a replica serves or activates.
   */
  backoff(): { retryAt: number; error: string } | undefined {
    const failure = this.failure;
    if (!failure || failure.retryAt <= Date.now()) return undefined;
    for (const backend of this.backends.values())
      if ((backend.tier === "ready" || isWarming(backend.tier)) && !failure.failed.has(backend.replica))
        return undefined;
    return { retryAt: failure.retryAt, error: failure.error };
  }

  /** Takes up what an event says of the back-off (see `failure`). */
  private learnBackoff(event: ReplicaEvent): void {
    if (event.error !== undefined && event.tier !== "ready") {
      const failed = new Set([event.replica]);
      for (const backend of this.backends.values()) if (isWarming(backend.tier)) failed.add(backend.replica);
      this.failure =
        event.retryAt !== undefined ? { error: event.error, retryAt: event.retryAt, failed } : undefined;
    } else if (event.retryAt !== undefined || event.tier === "ready") this.failure = undefined;
  }

  /** A request to `backend` finished: free its capacity and let the next held one go. */
  release(backend: Backend): void {
    backend.inFlight--;
    this.inFlightTotal--;
    this.lastActiveAt = Date.now();
    if (this.inFlightTotal === 0 || backend.tier === "draining") this.listener.loadChanged(this.config.id);
    this.dispatchHeld();
  }

  /**
   * How a replica that failed under a request went, when the control plane says it went on its own
   * (its engine's exit): waits up to `withinMs` while the replica still counts as ready, since the
   * platform sees an engine exit a moment after its connections close. Undefined when the
   * control plane said nothing of it in time, or knows no exit (on Kubernetes, a pod's).
   */
  async exitOf(replica: string, withinMs: number): Promise<string | undefined> {
    const told = () => this.exits.has(replica) || this.backends.get(replica)?.tier !== "ready";
    if (!told())
      await new Promise<void>((resolve) => {
        const check = () => {
          if (!told()) return;
          clearTimeout(timer);
          this.fateWaiters.delete(check);
          resolve();
        };
        const timer = setTimeout(() => {
          this.fateWaiters.delete(check);
          resolve();
        }, withinMs);
        this.fateWaiters.add(check);
      });
    return this.exits.get(replica);
  }

  /** Registers how to end one forward to `backend` when its drain time is over; returns the unregister. */
  onDrainEnd(backend: Backend, end: (unresponsive: boolean) => void): () => void {
    return backend.drainEnds.add(end);
  }

  /**
   * A connection to `backend` failed before any byte: stop using it until it is known to be
   * reachable. The control plane re-checks the engine and replaces it if it is gone; one it finds
   * well changes no tier, so no report would say it is routable again: the route finds out itself.
   */
  markUnreachable(backend: Backend): void {
    backend.suspect = true;
    this.listener.demand(this.config.id, backend.replica);
    this.probe(backend);
  }

  /**
   * Asks a suspect replica's engine for `/health`; once it answers, the replica is routable again
   * and the held requests go. An answer, not only an accepted connection: an engine on its way down
   * (a process exiting, whose listening socket outlives it a moment) still completes handshakes,
   * and a request sent again to it would fail again, spending its one resend. A probe that fails
   * leaves it to the control plane; the next request held tries again, so a model never stays
   * unroutable while its engine is well.
   */
  private probe(backend: Backend): void {
    if (backend.probing) return;
    backend.probing = true;
    void backend.pool
      .request({
        method: "GET",
        path: "/health",
        // The whole probe, not only each wait: an engine sending interim answers (103), or its body a
        // byte at a time, restarts undici's timeouts with each, and would keep the probe going forever.
        signal: AbortSignal.timeout(probeTimeoutMs),
        headersTimeout: probeTimeoutMs,
        bodyTimeout: probeTimeoutMs,
      })
      .then(async (answer) => {
        await answer.body.dump();
        return answer.statusCode >= 200 && answer.statusCode < 300;
      })
      .catch(() => false)
      .then((well) => {
        backend.probing = false;
        if (!well || !backend.suspect || this.backends.get(backend.replica) !== backend) return;
        backend.suspect = false;
        if (this.queue.length > 0) this.dispatchHeld();
      });
  }

  apply(event: ReplicaEvent): void {
    this.lastEvent = event;
    if (event.exit !== undefined) {
      keepNewest(this.exits, event.replica, event.exit, keptExits);
    }
    this.learnBackoff(event);
    if (event.estimateMs !== undefined && event.tier === "starting") this.estimates.start = event.estimateMs;
    if (event.estimateMs !== undefined && event.tier === "waking") this.estimates.wake = event.estimateMs;
    if (event.traceparent && event.traceparent !== this.announced.at(-1)?.traceparent) {
      this.announced.push({ traceparent: event.traceparent, at: performance.now() });
      if (this.announced.length > 4) this.announced.shift();
    }
    let backend = this.backends.get(event.replica);
    if (!event.address || event.tier === "cold") {
      if (backend) {
        this.backends.delete(event.replica);
        closeBackend(backend);
        this.forsake(event.replica);
      }
    } else {
      if (!backend || backend.address !== event.address) {
        if (backend) {
          closeBackend(backend);
          // Another engine under the same name: what the old one kept in memory is not in it.
          this.forsake(event.replica);
        }
        const connections = this.perReplica;
        const spares = new SpareConnections(new URL(`http://${event.address}`), {
          connectTimeout: timerValue(this.config.connectTimeout),
        });
        backend = {
          replica: event.replica,
          address: event.address,
          tier: event.tier,
          // Nothing runs on this engine yet: requests in flight to the one before end there and
          // are counted off that one (`release`). Carried over, they stayed counted here for good
          // (found by a probe: with `concurrency: 1` a replica seen at a new address, a pod
          // recreated under its name, was never routed to again).
          inFlight: 0,
          spares,
          pool: newPool(event.address, spares, connections),
          connections,
          retiredPools: new Set(),
          suspect: false,
          drainEnds: new LinkedSet(),
        };
        this.backends.set(event.replica, backend);
      }
      backend.tier = event.tier;
      backend.suspect = false;
      if (event.tier === "draining") armDrainEnd(backend, event.endsAt, event.unresponsive === true);
      else armDrainEnd(backend, undefined, false);
      if (event.tier !== "waking" && event.tier !== "ready") backend.spares.release();
    }
    for (const told of [...this.fateWaiters]) told();
    if (event.error && event.tier !== "ready") {
      // The activation these requests waited for failed: answer them now, with the reason.
      this.pinnedHeld = 0;
      for (const item of this.queue.drain()) {
        item.value.reject({
          reason: "activation-failed",
          message: event.error,
          // The model tries again once its back-off is over: a retry before then would be held
          // until then, or fail the same way.
          retryAfterMs:
            event.retryAt !== undefined
              ? Math.max(minRetryAfterMs, event.retryAt - Date.now())
              : this.retryAfterMs(),
        });
      }
      this.listener.loadChanged(this.config.id);
      return;
    }
    this.connectAhead();
    this.dispatchHeld();
  }

  /**
   * The model's settings changed (a reload, a Model edited): each replica takes as many requests at
   * once as they now allow. A pool cannot change its number of connections, so a replica whose
   * number changed gets a new one; the old one finishes what was sent through it, then closes.
   * Found by a probe: `concurrency` raised from 1 to 4 left the running replica at one request at a
   * time, and the requests held behind a long stream waited it out.
   */
  reconfigure(): void {
    const connections = this.perReplica;
    for (const backend of this.backends.values()) {
      if (backend.connections === connections) continue;
      const old = backend.pool;
      backend.retiredPools.add(old);
      void old
        .close()
        .catch(() => {})
        .finally(() => backend.retiredPools.delete(old));
      backend.pool = newPool(backend.address, backend.spares, connections);
      backend.connections = connections;
    }
    this.connectAhead();
    this.dispatchHeld();
  }

  /** Answers every held request: Snooze shuts down (503), or the model was removed (404). */
  answerHeld(reason: "shutdown" | "removed" = "shutdown"): void {
    this.pinnedHeld = 0;
    for (const item of this.queue.drain()) item.value.reject({ reason, retryAfterMs: this.retryAfterMs() });
  }

  /**
   * Answers every held request and closes connections: gracefully (requests in flight finish;
   * resolves when they have), or `force`d (whatever is still open is cut at once).
   */
  async close(force = false, reason: "shutdown" | "removed" = "shutdown"): Promise<void> {
    this.closed = reason;
    this.answerHeld(reason);
    await Promise.all(
      [...this.backends.values()].flatMap((b) => {
        b.spares.close();
        return [b.pool, ...b.retiredPools].map((pool) =>
          (force ? pool.destroy() : pool.close()).catch(() => {}),
        );
      }),
    );
  }

  /**
   * What a held request waits for, for progress lines: `waking qwen, ~2s` when the activation has a
   * measured estimate, else `starting qwen, 3s so far`. `since` is on the performance clock.
   */
  progress(since: number): string {
    const event = this.lastEvent;
    const verb =
      event?.tier === "starting" ? "starting" : event?.tier === "waking" ? "waking" : "waiting for";
    if (event?.estimateMs !== undefined && (event.tier === "starting" || event.tier === "waking")) {
      return `${verb} ${this.config.id}, ~${formatDuration(Math.max(0, event.since + event.estimateMs - Date.now()))}`;
    }
    return `${verb} ${this.config.id}, ${formatDuration(performance.now() - since)} so far`;
  }

  /**
   * While the engine the model's latest event is about is being stopped (`ReplicaEvent.goneBy`):
   * how long until it is gone at the latest, and the model can start again. Undefined otherwise.
   */
  stopLeftMs(): number | undefined {
    const event = this.lastEvent;
    if (event?.goneBy === undefined || event.tier === "cold") return undefined;
    return Math.max(0, event.goneBy - Date.now());
  }

  /**
   * How long until the model is likely ready, from the measured activation time: what is left of
   * the one under way, or, before it was announced (a burst refused in the instant its first request
   * asked for it), the whole of the last start or wake. Before any was measured, `unmeasuredMs`
   * stands in for it, and one under way is taken to run at least as long again as it has.
   */
  retryAfterMs(): number {
    const event = this.lastEvent;
    // Its engine is being stopped: the model starts again once it is gone, which may be as late as
    // the end of its stop grace (an engine deaf to SIGTERM); a retry sooner is held through the
    // rest of the stop, and refused again. Found by an outside tester: a wake's time, 2 s.
    const stopLeft = this.stopLeftMs();
    if (stopLeft !== undefined) return Math.max(minRetryAfterMs, stopLeft);
    if (event?.tier === "starting" || event?.tier === "waking") {
      // What is left of its estimate; past it (a reload's slower command, a loaded machine), at
      // least as long again as it has run, as one that has run long is likely to run long yet
      // (found by an outside tester: 1 s, three times, through a 12 s start measured at 1.2 s).
      // Nothing measured yet: `unmeasuredMs`, and as long again as it has run all along.
      const ran = Math.max(0, Date.now() - event.since);
      if (event.estimateMs !== undefined) {
        const left = event.estimateMs - ran;
        return Math.max(minRetryAfterMs, left > 0 ? left : ran);
      }
      const assumed = event.tier === "starting" ? unmeasuredMs.start : unmeasuredMs.wake;
      return Math.max(minRetryAfterMs, ran, assumed - ran);
    }
    // Ready, and every place taken (its requests were held or refused): a place frees as an answer
    // ends, about every measured answer time over the answers under way. Found by a probe: with
    // one place and answers of 8 s, a full queue said `Retry-After: 1`, and the openai client's two
    // retries were spent before any place could free.
    if (event?.tier === "ready" && this.inFlightTotal > 0 && this.totals.completed > 0)
      return Math.max(minRetryAfterMs, this.totals.serviceMs / this.totals.completed / this.inFlightTotal);
    // A replica that drains sleeps next (or stops, without sleep mode): at least a wake (or a
    // start) before it serves again (found by an outside tester: 1 s, while a sleep took minutes).
    const asleepNext = event?.tier === "asleep-1" || event?.tier === "asleep-2" || event?.tier === "draining";
    const kind =
      event === undefined || event.tier === "cold" || (event.tier === "draining" && !this.config.sleep)
        ? "start"
        : asleepNext
          ? "wake"
          : undefined;
    // None measured yet: the one that comes next is the model's first.
    const next = kind && (this.estimates[kind] ?? unmeasuredMs[kind]);
    return Math.max(minRetryAfterMs, event?.estimateMs ?? next ?? 0);
  }

  private taken(backend: Backend): void {
    backend.inFlight++;
    this.inFlightTotal++;
    this.lastActiveAt = Date.now();
    if (this.inFlightTotal === 1) this.listener.loadChanged(this.config.id);
  }

  private dispatchHeld(): void {
    if (this.waveDue) return;
    let released = 0;
    while (this.queue.length > 0) {
      if (released === this.wave) {
        this.wave = Math.min(releaseWave, this.wave * 2);
        this.waveDue = true;
        setImmediate(() => {
          this.waveDue = false;
          this.dispatchHeld();
        });
        break;
      }
      // In arrival order; one held for a replica without room lets those behind it go elsewhere.
      const item =
        this.pinnedHeld === 0
          ? this.queue.peek()!
          : this.queue.find((w) => this.available(w.pin) !== undefined);
      const backend = item && this.acquire(item.value.pin);
      if (!item || !backend) break;
      if (item === this.queue.peek()) this.queue.shift();
      else this.queue.remove(item);
      this.left(item);
      item.value.resolve(backend);
      released++;
    }
    // Nothing left held (released, expired or gone): the next release starts small again.
    if (this.queue.length === 0) this.wave = firstWave;
    if (released > 0 && this.queue.length === 0) {
      this.listener.loadChanged(this.config.id);
      // The last wave took its connections on this turn (the pool connects as it dispatches).
      setImmediate(() => this.releaseSpares());
    }
  }

  /** Opens connections to each waking replica for the requests held for it (see SpareConnections). */
  private connectAhead(): void {
    if (this.queue.length === 0) return;
    const wanted = Math.min(this.queue.length, this.perReplica, spareLimit);
    for (const backend of this.backends.values())
      if (backend.tier === "waking" && !backend.suspect) backend.spares.fill(wanted);
  }

  /** The release is over: spares no request took are closed (a waking replica keeps its own). */
  private releaseSpares(): void {
    for (const backend of this.backends.values()) if (backend.tier !== "waking") backend.spares.release();
  }

  /** A held request left the queue (its replica's, `hold`'s `pin`, counted in `pinnedHeld`). */
  private left(item: Held<Waiter>): void {
    if (item.value.pin !== undefined) this.pinnedHeld--;
  }

  /**
   * The requests held for `replica` alone are answered: it went, and whatever they wanted of it
   * (a stored response in its engine's memory) went with it.
   */
  private forsake(replica: string): void {
    if (this.pinnedHeld === 0) return;
    for (const item of this.queue.removeWhere((w) => w.pin === replica)) {
      this.left(item);
      item.value.reject({ reason: "replica-gone", retryAfterMs: 0 });
    }
    if (this.queue.length === 0) this.listener.loadChanged(this.config.id);
  }

  private expired(item: Held<Waiter>): void {
    this.left(item);
    // A model with a ready replica was there, only full: the request waited for room, not a start.
    const busy = [...this.backends.values()].some((b) => b.tier === "ready");
    item.value.reject({ reason: "budget", retryAfterMs: this.retryAfterMs(), ...(busy ? { busy } : {}) });
    if (this.queue.length === 0) this.listener.loadChanged(this.config.id);
  }
}

/**
 * A draining replica's engine sleeps or stops once its drain time is over, and vLLM's `mode=wait`
 * sleep would wait for whatever still runs, however long: the activator ends those forwards then
 * (the engine sees its clients go and aborts them), each client told why.
 *
 * A drain over already when it is told (an engine found unresponsive drains for no time) ends them
 * now, not on a timer: the control plane stops that engine right after telling, and a timer, even
 * of 0 ms, let the stop's news come first: the connection it closed failed the forward as
 * `unreachable`, or its exit's `cold` cleared the timer (found by a test made tolerant of it; on a
 * loaded machine, one run in two).
 */
function armDrainEnd(backend: Backend, endsAt: number | undefined, unresponsive: boolean): void {
  clearBackgroundTimer(backend.drainTimer);
  backend.drainTimer = undefined;
  if (endsAt === undefined) return;
  const end = () => {
    backend.drainTimer = undefined;
    for (const ending of backend.drainEnds) ending(unresponsive);
  };
  const ms = timerValue(endsAt - Date.now());
  if (ms === 0) end();
  else backend.drainTimer = backgroundTimer(end, ms);
}

/** Whether `backend` takes a request now: ready, reachable, below `limit` requests and its connections. */
function hasRoom(backend: Backend, limit: number): boolean {
  return (
    backend.tier === "ready" && !backend.suspect && backend.inFlight < Math.min(limit, backend.connections)
  );
}

function closeBackend(backend: Backend): void {
  clearBackgroundTimer(backend.drainTimer);
  backend.spares.close();
  for (const pool of [backend.pool, ...backend.retiredPools]) void pool.close().catch(() => {});
}

/** The connections to one replica's engine at `address`, at most `connections` of them. */
function newPool(address: string, spares: SpareConnections, connections: number): Pool {
  return new (undici().Pool)(`http://${address}`, {
    // One connection per in-flight request, as many as the throttler lets through (`tryAcquire`),
    // so no request ever waits inside undici, unseen by the hold budget and the metrics (long SSE
    // streams would keep it waiting forever). The bound keeps an unlimited `concurrency` from
    // opening a socket per held request (EMFILE).
    connections,
    pipelining: 1,
    // Its connect timeout is the spares' (they dial for the pool when none is left).
    connect: spares.connect,
    // Per request (forward): the first-byte and idle timeouts of the current settings.
    headersTimeout: 0,
    bodyTimeout: 0,
  });
}
