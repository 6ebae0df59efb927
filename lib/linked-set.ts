/**
 * A set of entries that come and go by the thousand a second (one per request under way), kept as a
 * doubly linked list: `add` returns the entry's removal, and iteration sees the entries in the order
 * they were added (a snapshot: they are walked rarely, at a shutdown or a drain's end).
 *
 * Why not a `Set`: a long-lived Set that takes and drops an entry per request makes V8 keep every
 * request's objects alive through its young-generation collections. Each time deleted entries fill
 * its table, V8 copies the live ones into a new table; the table left behind still points at the
 * entries it held (and at its successor). Once the Set's table is in the old generation (after any
 * full collection), the scavenger counts every such pointer from the old generation as live until the
 * next full collection proves those tables dead, so each entry (a closure holding a request, its
 * answer and its buffers) survives and is promoted. Measured on the warm path (docs/benchmarks.md):
 * about 4 KiB promoted per request through three such Sets, against 0.15 KiB without, and scavenges
 * of 20 to 60 ms. A list node holds only its neighbours, and a removed node lets go of them.
 */
export class LinkedSet<T> {
  private head?: Entry<T>;
  private tail?: Entry<T>;
  private count = 0;

  get size(): number {
    return this.count;
  }

  /** Adds `value` (again, if it is in already: each add is an entry of its own); returns its removal. */
  add(value: T): () => void {
    const entry: Entry<T> = { value, prev: this.tail, next: undefined, removed: false };
    if (this.tail) this.tail.next = entry;
    else this.head = entry;
    this.tail = entry;
    this.count++;
    return () => this.unlink(entry);
  }

  /** The entries as they are now: removing or adding some while walking them changes no step of the walk. */
  [Symbol.iterator](): IterableIterator<T> {
    const values: T[] = [];
    for (let entry = this.head; entry; entry = entry.next) values.push(entry.value);
    return values[Symbol.iterator]();
  }

  private unlink(entry: Entry<T>): void {
    if (entry.removed) return;
    entry.removed = true;
    if (entry.prev) entry.prev.next = entry.next;
    else this.head = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else this.tail = entry.prev;
    // A removed entry that outlives this list's use of it (promoted, then dropped) holds nothing young.
    entry.prev = undefined;
    entry.next = undefined;
    this.count--;
  }
}

interface Entry<T> {
  value: T;
  prev: Entry<T> | undefined;
  next: Entry<T> | undefined;
  removed: boolean;
}
