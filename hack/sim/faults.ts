/**
 * Faults the simulator injects on demand, from flags at start and from
 * `POST /sim/faults` at run time. Counts are consumed one per occurrence.
 */
export interface Faults {
  /** The next N wakes fail with a 500, leaving the engine asleep. */
  wakeFail: number;
  /** The next N sleeps fail with a 500, leaving the engine awake (its scheduler resumed). */
  sleepFail: number;
  /** The next N wakes never answer; the engine is stuck (sleep, wake and inference hang). */
  wakeHang: number;
  /** A sleep with `mode=abort` while requests decode crashes the engine. */
  crashOnAbortSleep: boolean;
  /** The engine dies after it finished this many more inference requests; 0 is off. */
  dieAfter: number;
  /**
   * The next N inference requests have their connection reset once read, before any byte of an
   * answer: a connection lost between proxy and engine while the engine itself stays healthy.
   */
  dropConnection: number;
  /** Loading never finishes: the port never opens. Only meaningful at start. */
  neverReady: boolean;
}

export function noFaults(): Faults {
  return {
    wakeFail: 0,
    sleepFail: 0,
    wakeHang: 0,
    crashOnAbortSleep: false,
    dieAfter: 0,
    dropConnection: 0,
    neverReady: false,
  };
}

const countKeys = ["wakeFail", "sleepFail", "wakeHang", "dieAfter", "dropConnection"] as const;
const flagKeys = ["crashOnAbortSleep", "neverReady"] as const;

/**
 * Merges a JSON update from the admin endpoint into `faults`; keys left out keep
 * their value. Returns an error message for a bad update and changes nothing then.
 */
export function applyFaultUpdate(faults: Faults, update: unknown): string | undefined {
  if (!update || typeof update !== "object" || Array.isArray(update)) return "the body must be a JSON object";
  const entries = Object.entries(update);
  for (const [key, value] of entries) {
    if ((countKeys as readonly string[]).includes(key)) {
      if (!Number.isInteger(value) || (value as number) < 0) return `${key} must be a non-negative integer`;
    } else if ((flagKeys as readonly string[]).includes(key)) {
      if (typeof value !== "boolean") return `${key} must be true or false`;
    } else {
      return `unknown fault "${key}"; known: ${[...countKeys, ...flagKeys].join(", ")}`;
    }
  }
  Object.assign(faults, update);
  return undefined;
}
