/** Waiting in simulated time: every delay passes through the engine's `--time-scale`. */

export class AbortedError extends Error {
  constructor() {
    super("aborted");
    this.name = "AbortedError";
  }
}

/** Resolves after `ms` of wall time, or rejects with AbortedError when `signal` aborts first. */
export function delay(ms: number, signal?: AbortSignal): Promise<void> {
  if (signal?.aborted) return Promise.reject(new AbortedError());
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(new AbortedError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A promise that never settles unless `signal` aborts: a hung engine. */
export function forever(signal?: AbortSignal): Promise<never> {
  return new Promise((_resolve, reject) => {
    if (signal?.aborted) reject(new AbortedError());
    signal?.addEventListener("abort", () => reject(new AbortedError()), { once: true });
  });
}
