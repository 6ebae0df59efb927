import { backgroundTimer, clearBackgroundTimer } from "../lib/background-timer.ts";

/**
 * A bounded FIFO of requests waiting for their model. Every entry of one queue
 * has the same budget, so deadlines are in arrival order and one timer on the
 * head serves the whole queue.
 *
 * Times are on the monotonic clock (`performance.now()`, as the timers run): a deadline on the wall
 * clock moved with it, so a clock set back an hour (an NTP step, a VM resumed) held every request an
 * hour past its budget, and one set forward refused the holds behind the first at once.
 */
export interface Held<T> {
  readonly value: T;
  /** When it was held (ms, monotonic clock). */
  readonly enqueuedAt: number;
  /** When its budget is spent (ms, monotonic clock). */
  readonly deadline: number;
}

export class HoldQueue<T> {
  private readonly items: Held<T>[] = [];
  private head = 0;
  private timer?: NodeJS.Timeout;
  private readonly capacity: number;
  private readonly budgetMs: number;
  private readonly onExpire: (item: Held<T>) => void;

  constructor(capacity: number, budgetMs: number, onExpire: (item: Held<T>) => void) {
    this.capacity = capacity;
    this.budgetMs = budgetMs;
    this.onExpire = onExpire;
  }

  get length(): number {
    return this.items.length - this.head;
  }

  /**
   * Adds a request; undefined when the queue is full, unless `admitted`: a request taken in once
   * already (it was on an engine that failed under it) is not refused for a place it had.
   */
  push(value: T, now = performance.now(), admitted = false): Held<T> | undefined {
    if (this.length >= this.capacity && !admitted) return undefined;
    const item = { value, enqueuedAt: now, deadline: now + this.budgetMs };
    this.items.push(item);
    if (this.length === 1) this.arm();
    return item;
  }

  /** The oldest waiting request, left in place. */
  peek(): Held<T> | undefined {
    return this.length > 0 ? this.items[this.head] : undefined;
  }

  /** The oldest waiting request, removed. */
  shift(): Held<T> | undefined {
    if (this.length === 0) return undefined;
    const item = this.items[this.head]!;
    this.items[this.head++] = undefined as unknown as Held<T>;
    this.compact();
    this.arm();
    return item;
  }

  /** Removes one request wherever it is (its client went away). */
  remove(item: Held<T>): boolean {
    const index = this.items.indexOf(item, this.head);
    if (index < 0) return false;
    this.items.splice(index, 1);
    if (index === this.head) this.arm();
    return true;
  }

  /** The oldest waiting request that `wanted` accepts, left in place. */
  find(wanted: (value: T) => boolean): Held<T> | undefined {
    for (let i = this.head; i < this.items.length; i++)
      if (wanted(this.items[i]!.value)) return this.items[i];
    return undefined;
  }

  /** The waiting requests' values, in arrival order. */
  *values(): IterableIterator<T> {
    for (let i = this.head; i < this.items.length; i++) yield this.items[i]!.value;
  }

  /** Removes every waiting request that `gone` accepts, returning them in arrival order. */
  removeWhere(gone: (value: T) => boolean): Held<T>[] {
    const removed = this.items.slice(this.head).filter((item) => gone(item.value));
    for (const item of removed) this.remove(item);
    return removed;
  }

  /** Empties the queue, returning what was in it in arrival order. */
  drain(): Held<T>[] {
    const all = this.items.slice(this.head);
    this.items.length = 0;
    this.head = 0;
    this.arm();
    return all;
  }

  private compact(): void {
    if (this.head > 1024 && this.head * 2 > this.items.length) {
      this.items.splice(0, this.head);
      this.head = 0;
    }
  }

  private arm(): void {
    clearBackgroundTimer(this.timer);
    this.timer = undefined;
    const first = this.items[this.head];
    if (!first || !Number.isFinite(first.deadline)) return;
    this.timer = backgroundTimer(() => this.expire(), Math.max(0, first.deadline - performance.now()));
  }

  private expire(): void {
    const now = performance.now();
    const expired: Held<T>[] = [];
    while (this.length > 0 && this.items[this.head]!.deadline <= now) {
      expired.push(this.items[this.head]!);
      this.items[this.head++] = undefined as unknown as Held<T>;
    }
    this.compact();
    this.arm();
    for (const item of expired) this.onExpire(item);
  }
}
