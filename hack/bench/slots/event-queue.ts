/**
 * The agenda of a discrete-event simulation: callbacks due at virtual times,
 * taken earliest first. Events due at the same moment run in the order they
 * were scheduled, so a run is a pure function of its inputs.
 */
export interface Scheduled {
  readonly at: number;
  cancel(): void;
}

interface Entry {
  at: number;
  seq: number;
  run: () => void;
  cancelled: boolean;
}

export class EventQueue {
  private readonly heap: Entry[] = [];
  private seq = 0;

  get size(): number {
    return this.heap.length;
  }

  schedule(at: number, run: () => void): Scheduled {
    const entry: Entry = { at, seq: this.seq++, run, cancelled: false };
    this.heap.push(entry);
    this.up(this.heap.length - 1);
    return {
      at,
      cancel: () => {
        entry.cancelled = true;
      },
    };
  }

  /** When the next live event is due; undefined when none is left. */
  peek(): number | undefined {
    this.skipCancelled();
    return this.heap[0]?.at;
  }

  /** The next live event, removed; undefined when none is left. */
  pop(): { at: number; run: () => void } | undefined {
    this.skipCancelled();
    return this.take();
  }

  private skipCancelled(): void {
    while (this.heap.length > 0 && this.heap[0]!.cancelled) this.take();
  }

  private take(): Entry | undefined {
    const top = this.heap[0];
    const last = this.heap.pop();
    if (top && last && top !== last) {
      this.heap[0] = last;
      this.down(0);
    }
    return top;
  }

  private before(a: Entry, b: Entry): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  private up(index: number): void {
    const heap = this.heap;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (!this.before(heap[index]!, heap[parent]!)) return;
      [heap[index], heap[parent]] = [heap[parent]!, heap[index]!];
      index = parent;
    }
  }

  private down(index: number): void {
    const heap = this.heap;
    for (;;) {
      const left = index * 2 + 1;
      const right = left + 1;
      let first = index;
      if (left < heap.length && this.before(heap[left]!, heap[first]!)) first = left;
      if (right < heap.length && this.before(heap[right]!, heap[first]!)) first = right;
      if (first === index) return;
      [heap[index], heap[first]] = [heap[first]!, heap[index]!];
      index = first;
    }
  }
}
