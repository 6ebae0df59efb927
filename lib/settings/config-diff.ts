import type { ModelConfig, SlotConfig, SnoozeConfig } from "./resolve.ts";

/**
 * Settings an engine is started with: a change to one of them means a new process. `sleep` is one
 * (`VLLM_SERVER_DEV_MODE` goes into the engine's environment with it); so is `slot`, because a
 * running engine holds its accelerator and cannot change whom it shares it with; and `device`, its
 * slot's GPU, which it is put on at its start (`CUDA_VISIBLE_DEVICES`).
 */
export const engineKeys: readonly string[] = ["command", "env", "port", "sleep", "slot", "device"];

/**
 * The top-level settings, each of which a running Snooze takes over at a reload (a new event sink
 * is built for the last two). A setting added here that can only apply at the next start must be
 * told apart again, so the reload can say so.
 */
const globalKeys = [
  "maxBodySize",
  "maxHeldBytes",
  "bodyTimeout",
  "hostMemoryBudget",
  "eventSink",
  "eventMode",
] as const;

/** A model whose settings changed, and which of them. */
export interface ChangedModel {
  config: ModelConfig;
  keys: string[];
}

/** What turns the settings in use into the new ones. */
export interface ConfigDiff {
  added: ModelConfig[];
  /** Ids of models no longer in the file. */
  removed: string[];
  /** An engine setting changed: the engine is drained, stopped and started again with the new ones. */
  restarted: ChangedModel[];
  /** Only settings the running controller and activator take over: the engine keeps running. */
  updated: ChangedModel[];
  /** Slots whose own settings changed; their members stay. */
  slots: SlotConfig[];
  /** Top-level settings that changed (each applies at once). */
  global: (typeof globalKeys)[number][];
}

/** The changes from `before` to `after`, model by model (pure). */
export function diffConfig(before: SnoozeConfig, after: SnoozeConfig): ConfigDiff {
  const diff: ConfigDiff = { added: [], removed: [], restarted: [], updated: [], slots: [], global: [] };
  for (const [id, config] of after.models) {
    const old = before.models.get(id);
    if (!old) {
      diff.added.push(config);
      continue;
    }
    const keys = changedSettings(old, config);
    if (keys.length === 0) continue;
    if (keys.some((key) => engineKeys.includes(key))) diff.restarted.push({ config, keys });
    else diff.updated.push({ config, keys });
  }
  for (const id of before.models.keys()) if (!after.models.has(id)) diff.removed.push(id);
  for (const [name, slot] of after.slots) {
    const old = before.slots.get(name);
    if (old && changedKeys(old, slot).length > 0) diff.slots.push(slot);
  }
  for (const key of globalKeys) if (!same(before[key], after[key])) diff.global.push(key);
  return diff;
}

/** Whether a diff changes nothing at all. */
export function isEmptyDiff(diff: ConfigDiff): boolean {
  return (
    diff.added.length +
      diff.removed.length +
      diff.restarted.length +
      diff.updated.length +
      diff.slots.length +
      diff.global.length ===
    0
  );
}

/**
 * The settings of a model that changed, as the file names them, sorted: `explicit` (which keys the
 * file writes, not a key itself) shows as the keys written or left out since, though their values
 * may be the defaults'.
 */
function changedSettings(a: ModelConfig, b: ModelConfig): string[] {
  const keys = new Set(changedKeys(a, b).filter((key) => key !== "explicit"));
  const before = new Set(a.explicit ?? []);
  const after = new Set(b.explicit ?? []);
  for (const key of [...before, ...after]) if (before.has(key) !== after.has(key)) keys.add(key);
  return [...keys].sort();
}

/** The keys whose values differ between two settings objects, sorted. */
function changedKeys(a: object, b: object): string[] {
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  return [...keys].filter((key) => !same(left[key], right[key])).sort();
}

/**
 * Whether two settings of one model start the same engine (no engine setting differs): a reload
 * that restores what a running engine was started with leaves it running.
 */
export function sameEngineSettings(a: ModelConfig, b: ModelConfig): boolean {
  return engineKeys.every((key) => same(a[key as keyof ModelConfig], b[key as keyof ModelConfig]));
}

/** Structural equality of settings values: numbers (Infinity too), strings, arrays, plain objects. */
function same(a: unknown, b: unknown): boolean {
  if (Object.is(a, b)) return true;
  if (typeof a !== "object" || typeof b !== "object" || a === null || b === null) return false;
  if (Array.isArray(a) !== Array.isArray(b)) return false;
  const left = a as Record<string, unknown>;
  const right = b as Record<string, unknown>;
  const keys = new Set([...Object.keys(left), ...Object.keys(right)]);
  for (const key of keys) if (!same(left[key], right[key])) return false;
  return true;
}
