import { keepNewest } from "../keep-newest.ts";
import { fitName, maxObjectName } from "./object-name.ts";

/**
 * What to do with one more Kubernetes Event, decided as client-go's event recorders do, so a model
 * that wakes and sleeps all day leaves a handful of Events with counts rather than thousands:
 *
 * - **Series** (k8s.io/client-go/tools/events): an Event isomorphic to one recorded within the last
 *   `seriesWindowMs` (same object, reason, action and reporting controller; the note is not part of
 *   the key) is not created again; the first one's `series` counts it instead.
 * - **Spam filter** (tools/record's EventCorrelator): a token bucket per object, `burst` Events,
 *   refilled at one per `refillMs`; past it, Events are dropped.
 *
 * It keeps state but reads no clock: `now` comes with every call, so tests need no timers.
 */
export type Correlation =
  | { kind: "create"; name: string }
  | { kind: "series"; name: string; count: number; lastObservedTime: number }
  | { kind: "drop" };

export interface CorrelatorOptions {
  burst?: number;
  refillMs?: number;
  seriesWindowMs?: number;
  /** Series and buckets kept at most; the oldest go first. */
  maxKeys?: number;
}

interface SeriesEntry {
  name: string;
  count: number;
  lastObserved: number;
}

export class EventCorrelator {
  private readonly burst: number;
  private readonly refillMs: number;
  private readonly seriesWindowMs: number;
  private readonly maxKeys: number;
  private readonly series = new Map<string, SeriesEntry>();
  private readonly buckets = new Map<string, { tokens: number; at: number }>();
  private sequence = 0;

  constructor(options: CorrelatorOptions = {}) {
    this.burst = options.burst ?? 25;
    this.refillMs = options.refillMs ?? 5 * 60_000;
    this.seriesWindowMs = options.seriesWindowMs ?? 6 * 60_000;
    this.maxKeys = options.maxKeys ?? 4_096;
  }

  /**
   * One more Event about `object` (its uid or `namespace/name`) whose isomorphism key is `key`;
   * `name` is the object's name, the prefix of a new Event's name (as client-go names them).
   */
  observe(object: string, key: string, name: string, now: number): Correlation {
    if (!this.take(object, now)) return { kind: "drop" };
    const seriesKey = `${object}\u0000${key}`;
    const entry = this.series.get(seriesKey);
    if (entry && now - entry.lastObserved <= this.seriesWindowMs) {
      entry.count++;
      entry.lastObserved = now;
      // Re-inserted: the map's order is the order of last use, for eviction.
      keepNewest(this.series, seriesKey, entry, this.maxKeys);
      return { kind: "series", name: entry.name, count: entry.count, lastObservedTime: now };
    }
    const created = { name: eventName(name, now, this.sequence++), count: 1, lastObserved: now };
    keepNewest(this.series, seriesKey, created, this.maxKeys);
    return { kind: "create", name: created.name };
  }

  /** The Event of a series is gone (deleted, or expired by the apiserver's TTL): the next one starts anew. */
  forget(object: string, key: string): void {
    this.series.delete(`${object}\u0000${key}`);
  }

  private take(object: string, now: number): boolean {
    const bucket = this.buckets.get(object) ?? { tokens: this.burst, at: now };
    bucket.tokens = Math.min(this.burst, bucket.tokens + Math.max(0, now - bucket.at) / this.refillMs);
    bucket.at = now;
    keepNewest(this.buckets, object, bucket, this.maxKeys);
    if (bucket.tokens < 1) return false;
    bucket.tokens -= 1;
    return true;
  }
}

/**
 * `<object name>.<hex nanoseconds>`, as client-go names Events; the sequence fills the nanoseconds a
 * millisecond clock does not have, so two Events of one millisecond never share a name. An object
 * name too long for that to fit in a name (over about 236 characters: found by an outside tester,
 * the API server refused such an Event, so it was lost) keeps its first part and a hash of itself.
 */
function eventName(object: string, now: number, sequence: number): string {
  const nanos = BigInt(Math.floor(now)) * 1_000_000n + BigInt(sequence % 1_000_000);
  const suffix = nanos.toString(16);
  return `${fitName(object, maxObjectName - suffix.length - 1)}.${suffix}`;
}
