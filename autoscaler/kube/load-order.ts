/**
 * The order of an activator's load reports for a model. An activator reports load two ways, each an
 * HTTP post of its own: a demand (each request held, with the load then) and the stats it batches to
 * the end of its turn (with the load when the change was seen). Posts race, so an older report can
 * arrive after a newer one; applied, it told a leader that six held requests were one, and the
 * replicas woken for the other five were drained (found with real KEDA, an e2e test). Each report
 * carries `seq`, increasing within an activator process and starting above the last process's (a
 * microsecond clock); a report not newer than the last one applied for its activator and model is
 * stale. Reports without `seq` (an older activator) are always taken.
 */
export class LoadOrder {
  readonly #last = new Map<string, { seq: number; at: number }>();
  readonly #expiryMs: number;

  /** `expiryMs`: how long an activator's last report is remembered (its load expires as long). */
  constructor(expiryMs: number) {
    this.#expiryMs = expiryMs;
  }

  /** Whether the report `seq` of `activator` for `model` is newer than the last one taken; takes it if so. */
  fresh(activator: string, model: string, seq: number | undefined, now: number): boolean {
    if (seq === undefined) return true;
    const key = `${activator}\0${model}`;
    const last = this.#last.get(key);
    if (last && last.seq >= seq && now - last.at <= this.#expiryMs) return false;
    this.#last.set(key, { seq, at: now });
    if (this.#last.size > 1_000) this.#prune(now);
    return true;
  }

  #prune(now: number): void {
    for (const [key, { at }] of this.#last) if (now - at > this.#expiryMs) this.#last.delete(key);
  }
}
