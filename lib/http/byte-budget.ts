/**
 * Bytes a server lets requests read and work on at once, shared by them: a request that would take
 * more than is left waits its turn, first come first served (a large one at the head is not passed
 * by smaller ones, so it cannot starve). A request asking for more than the whole budget gets the
 * whole of it. What memory a body costs is a multiple of its size (its chunks, their text, what
 * parsing it makes), so a server that reads every large body at once has no bound on its memory.
 */
export class ByteBudget {
  readonly capacity: number;
  private used = 0;
  private readonly waiting: { bytes: number; grant: () => void }[] = [];

  constructor(capacity: number) {
    this.capacity = capacity;
  }

  /** Bytes taken now. */
  get inUse(): number {
    return this.used;
  }

  /** Requests waiting for their turn now. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * Takes `bytes` (at most the whole budget) once they are free; resolves with the function that
   * gives them back (once, however often it is called). `signal` gives up the wait (its reason is
   * the rejection), for a client that went away meanwhile.
   */
  take(bytes: number, signal?: AbortSignal): Promise<() => void> {
    const wanted = Math.min(Math.max(0, bytes), this.capacity);
    const release = () => {
      let given = false;
      return () => {
        if (given) return;
        given = true;
        this.used -= wanted;
        this.grantWaiting();
      };
    };
    if (this.waiting.length === 0 && this.used + wanted <= this.capacity) {
      this.used += wanted;
      return Promise.resolve(release());
    }
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const entry = {
        bytes: wanted,
        grant: () => {
          signal?.removeEventListener("abort", onAbort);
          resolve(release());
        },
      };
      const onAbort = () => {
        const at = this.waiting.indexOf(entry);
        if (at >= 0) this.waiting.splice(at, 1);
        // The head left: those behind it may fit now.
        if (at === 0) this.grantWaiting();
        reject(signal!.reason);
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(entry);
    });
  }

  private grantWaiting(): void {
    while (this.waiting.length > 0 && this.used + this.waiting[0]!.bytes <= this.capacity) {
      const next = this.waiting.shift()!;
      this.used += next.bytes;
      next.grant();
    }
  }
}
