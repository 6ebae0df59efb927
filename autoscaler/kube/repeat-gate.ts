/**
 * Whether a log line that repeats is said now: at once the first time, then at most once every
 * `everyMs` per key, with how many times it came unsaid since. Pure apart from its memory: the
 * caller gives `now`.
 *
 * The keys it remembers are bounded (`maxKeys`): a client that invents a new key with every call
 * (a new name, a new unknown field) must not grow it without end. Keys are kept in the order they
 * were last said, so the ones older than the period go first; when all are recent, a new key is
 * only counted, and the next key said tells how many went unsaid (`unsaid`).
 */
export class RepeatGate {
  private readonly everyMs: number;
  private readonly maxKeys: number;
  private readonly told = new Map<string, { at: number; since: number }>();
  private unsaid = 0;

  constructor(options: { everyMs: number; maxKeys: number }) {
    this.everyMs = options.everyMs;
    this.maxKeys = options.maxKeys;
  }

  get size(): number {
    return this.told.size;
  }

  /** Undefined: not now (counted). Else say it, with the repeats of this key since it was said. */
  pass(key: string, now: number): { repeated: number; unsaid?: number } | undefined {
    const was = this.told.get(key);
    if (was && now - was.at < this.everyMs) {
      was.since++;
      return undefined;
    }
    if (!was) {
      for (const [old, { at }] of this.told) {
        if (this.told.size < this.maxKeys || now - at < this.everyMs) break;
        this.told.delete(old);
      }
      if (this.told.size >= this.maxKeys) {
        this.unsaid++;
        return undefined;
      }
    }
    this.told.delete(key);
    this.told.set(key, { at: now, since: 0 });
    const said: { repeated: number; unsaid?: number } = { repeated: was?.since ?? 0 };
    if (!was && this.unsaid > 0) {
      said.unsaid = this.unsaid;
      this.unsaid = 0;
    }
    return said;
  }
}
