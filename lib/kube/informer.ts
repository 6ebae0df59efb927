import { setTimeout as sleep } from "node:timers/promises";
import { type Logger, silentLogger } from "../log.ts";
import { isGone, KubeError, type KubeObject, type WatchEvent } from "./client.ts";

/** How an informer reads its objects: a consistent list, then a watch from its resourceVersion. */
export interface ListWatch<T> {
  /** `signal` aborts at the informer's stop: a list the API server never answers does not hold it. */
  list(signal: AbortSignal): Promise<{ items: T[]; resourceVersion: string }>;
  /** Streams events from `resourceVersion` until the stream ends (resolve) or fails (reject). */
  watch(resourceVersion: string, onEvent: (event: WatchEvent<T>) => void, signal: AbortSignal): Promise<void>;
}

export interface InformerHandler<T> {
  add?(object: T): void;
  /** Also called on every periodic resync, with `old === object`. */
  update?(object: T, old: T): void;
  delete?(object: T): void;
}

export interface InformerOptions<T> {
  /** For logs: what is watched (`pods`, `models.snooze.dev`). */
  name: string;
  source: ListWatch<T>;
  keyOf?: (object: T) => string;
  /** Every so often each cached object is delivered again as an update, so missed work is redone. */
  resyncMs?: number;
  /** A watch without any event (bookmarks included) for this long is presumed dead and restarted. */
  staleMs?: number;
  /** Back-off after a failed list or watch: doubling from `initialMs` up to `maxMs`. */
  backoff?: { initialMs: number; maxMs: number };
  log?: Logger;
}

const defaultKey = (object: unknown) => {
  const meta = (object as KubeObject).metadata;
  return meta.namespace ? `${meta.namespace}/${meta.name}` : meta.name;
};

/** The watch said its resourceVersion is too old (HTTP 410 or an ERROR event with code 410). */
class Expired extends Error {}

/**
 * A watch that ends sooner than this without a single event (bookmarks count) did not work: the
 * server, or a proxy before it, closes streams at once. As client-go's reflector ("very short
 * watch"), it is retried with back-off: resumed at once, it was a loop of watch requests as fast
 * as the server answered them.
 */
const shortWatchMs = 1_000;

/**
 * A list+watch cache of one resource, supervised: a failed list or watch is retried with
 * back-off, a watch that falls silent is restarted by a watchdog, "410 Gone" (the resourceVersion
 * was compacted away) leads to a fresh list whose differences are delivered as adds, updates and
 * deletes, and a periodic resync redelivers everything. Handlers see each change once, in order.
 */
export class Informer<T> {
  readonly name: string;
  private readonly source: ListWatch<T>;
  private readonly keyOf: (object: T) => string;
  private readonly resyncMs: number;
  private readonly staleMs: number;
  private readonly backoff: { initialMs: number; maxMs: number };
  private readonly log: Logger;
  private readonly cache = new Map<string, T>();
  private readonly handlers = new Set<InformerHandler<T>>();
  private resourceVersion = "";
  private stopped = false;
  private running?: Promise<void>;
  private watchAbort?: AbortController;
  /** Aborted at stop: the list under way and the wait before a retry end at once. */
  private readonly stopping = new AbortController();
  private resyncTimer?: NodeJS.Timeout;
  private syncedOnce = false;
  /** Watch events received so far (bookmarks too, not errors): whether a watch got anywhere. */
  private events = 0;
  /** `events` when the resourceVersion last expired: an expiry with none since is no progress. */
  private eventsAtExpiry = -1;
  private readonly syncWaiters = new Set<() => void>();
  /** Counters, for tests and the state endpoint. */
  readonly counts = { lists: 0, watches: 0, failures: 0, stale: 0, expired: 0 };

  constructor(options: InformerOptions<T>) {
    this.name = options.name;
    this.source = options.source;
    this.keyOf = options.keyOf ?? defaultKey;
    this.resyncMs = options.resyncMs ?? 5 * 60_000;
    this.staleMs = options.staleMs ?? 90_000;
    this.backoff = options.backoff ?? { initialMs: 250, maxMs: 30_000 };
    this.log = (options.log ?? silentLogger).child({ informer: options.name });
  }

  /** Subscribes; returns unsubscribe. Objects already cached are not replayed (use `list()`). */
  on(handler: InformerHandler<T>): () => void {
    this.handlers.add(handler);
    return () => this.handlers.delete(handler);
  }

  get synced(): boolean {
    return this.syncedOnce;
  }

  get(key: string): T | undefined {
    return this.cache.get(key);
  }

  list(): T[] {
    return [...this.cache.values()];
  }

  /** Starts list+watch; resolves once the first list is in the cache. */
  start(): Promise<void> {
    this.running ??= this.run();
    if (this.resyncMs > 0 && Number.isFinite(this.resyncMs)) {
      this.resyncTimer = setInterval(() => this.resync(), this.resyncMs);
      this.resyncTimer.unref();
    }
    return this.whenSynced();
  }

  whenSynced(): Promise<void> {
    if (this.syncedOnce) return Promise.resolve();
    return new Promise((resolve) => this.syncWaiters.add(resolve));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.resyncTimer);
    this.watchAbort?.abort();
    this.stopping.abort();
    await this.running;
  }

  private async run(): Promise<void> {
    let failures = 0;
    let needList = true;
    while (!this.stopped) {
      const eventsBefore = this.events;
      try {
        if (needList) {
          this.counts.lists++;
          const { items, resourceVersion } = await this.source.list(this.stopping.signal);
          if (this.stopped) return;
          this.replace(items);
          this.resourceVersion = resourceVersion;
          needList = false;
          if (!this.syncedOnce) {
            this.syncedOnce = true;
            for (const resolve of this.syncWaiters) resolve();
            this.syncWaiters.clear();
          }
        }
        const events = this.events;
        const watchedAt = performance.now();
        await this.watchOnce();
        if (!this.stopped && this.events === events && performance.now() - watchedAt < shortWatchMs)
          throw new Error(`the watch ended at once (within ${shortWatchMs} ms) without an event`);
        failures = 0;
      } catch (error) {
        if (this.stopped) return;
        if (error instanceof Expired || isGone(error)) {
          this.counts.expired++;
          needList = true;
          // The usual expiry (the watch was away longer than the server keeps history) lists again
          // at once. One with no event since the last one (the watch from a fresh list's
          // resourceVersion expired at once) is retried with back-off: at once, it was a loop
          // of full lists.
          if (this.events !== this.eventsAtExpiry) {
            this.eventsAtExpiry = this.events;
            this.log.info("resourceVersion expired; listing again", {
              resourceVersion: this.resourceVersion,
            });
            continue;
          }
        }
        // A watch that got events worked: its failure is a new outage, whose back-off starts from
        // the first step. Counted on from the last one (an API server that restarted twice within
        // a watch's minute), a single reset kept the cache stale for up to 30 s (found by a probe:
        // the activator saw a drain that late, and the autoscaler held the idle engine awake as long).
        if (this.events > eventsBefore) failures = 0;
        failures++;
        this.counts.failures++;
        const delay = Math.min(this.backoff.maxMs, this.backoff.initialMs * 2 ** (failures - 1));
        this.log.warn("list or watch failed; retrying", { error, failures, delayMs: delay });
        await sleep(delay * (0.8 + Math.random() * 0.4), undefined, { signal: this.stopping.signal }).catch(
          () => {},
        );
      }
    }
  }

  /** One watch stream; resolves when it ends normally or the watchdog restarts it. */
  private async watchOnce(): Promise<void> {
    this.counts.watches++;
    const abort = new AbortController();
    this.watchAbort = abort;
    let expired = false;
    let stale = false;
    let watchdog: NodeJS.Timeout | undefined;
    const pet = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => {
        stale = true;
        abort.abort();
      }, this.staleMs);
      watchdog.unref();
    };
    pet();
    try {
      await this.source.watch(
        this.resourceVersion,
        (event) => {
          if (abort.signal.aborted) return;
          pet();
          if (event.type === "ERROR") {
            const status = event.object as { code?: number; message?: string };
            if (status.code === 410) expired = true;
            else this.log.warn("watch error event", { status });
            abort.abort();
            return;
          }
          this.events++;
          this.apply(event);
        },
        abort.signal,
      );
    } catch (error) {
      if (!abort.signal.aborted) throw error;
    } finally {
      clearTimeout(watchdog);
    }
    if (expired) throw new Expired("resourceVersion expired");
    if (stale && !this.stopped) {
      this.counts.stale++;
      this.log.warn("watch fell silent; restarting it", { staleMs: this.staleMs });
    }
    // An ERROR event other than 410 ends the stream; the next loop watches again from the same place.
    if (abort.signal.aborted && !stale && !expired && !this.stopped)
      throw new KubeError(500, "WatchError", "watch error event");
  }

  private apply(event: WatchEvent<T>): void {
    const meta = (event.object as KubeObject).metadata;
    if (meta?.resourceVersion) this.resourceVersion = meta.resourceVersion;
    if (event.type === "BOOKMARK") return;
    const key = this.keyOf(event.object);
    const old = this.cache.get(key);
    if (event.type === "DELETED") {
      this.cache.delete(key);
      this.emit((h) => h.delete?.(old ?? event.object));
      return;
    }
    this.cache.set(key, event.object);
    if (old) this.emit((h) => h.update?.(event.object, old));
    else this.emit((h) => h.add?.(event.object));
  }

  /** A fresh list: deliver what changed since the cache, including deletions missed while away. */
  private replace(items: T[]): void {
    const seen = new Set<string>();
    for (const object of items) {
      const key = this.keyOf(object);
      seen.add(key);
      const old = this.cache.get(key);
      this.cache.set(key, object);
      if (!old) this.emit((h) => h.add?.(object));
      else if (versionOf(old) !== versionOf(object)) this.emit((h) => h.update?.(object, old));
    }
    for (const [key, object] of [...this.cache]) {
      if (seen.has(key)) continue;
      this.cache.delete(key);
      this.emit((h) => h.delete?.(object));
    }
  }

  private resync(): void {
    for (const object of this.cache.values()) this.emit((h) => h.update?.(object, object));
  }

  private emit(call: (handler: InformerHandler<T>) => void): void {
    for (const handler of this.handlers) {
      try {
        call(handler);
      } catch (error) {
        this.log.error("informer handler failed", { error });
      }
    }
  }
}

const versionOf = (object: unknown) => (object as KubeObject).metadata?.resourceVersion;
