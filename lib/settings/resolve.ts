import type { ConfigProblem } from "./config-error.ts";
import type { SnoozeFile } from "./file.ts";
import { builtinTierDefaults, type ResolvedTierSettings } from "./model.ts";
import { builtinSlotDefaults } from "./slot.ts";

/** A model ready to run: every tier setting filled in (times in ms, sizes in bytes). */
export interface ModelConfig extends ResolvedTierSettings {
  id: string;
  /** The name the engine serves when it is not `id` (a Model's `servedModel`): warm-ups and forwarded bodies use it. */
  servedModel?: string;
  command: string[];
  env: Record<string, string>;
  port?: number;
  /**
   * The tier settings the user set (in the model or in `defaults:`), sorted; the rest are built-in
   * defaults. Learned choices (the ladder under `wakeTarget`) never override these. Absent: unknown,
   * treated as none set.
   */
  explicit?: readonly string[];
}

export type SlotConfig = typeof builtinSlotDefaults & { name: string };

export interface SnoozeConfig {
  models: Map<string, ModelConfig>;
  /** Alias or id → model id. */
  names: Map<string, string>;
  slots: Map<string, SlotConfig>;
  hostMemoryBudget: number;
  maxBodySize: number;
  /** Body bytes of requests being read or held, all models together (default 256Mi). */
  maxHeldBytes?: number;
  eventSink?: string;
  /** How CloudEvents go to the sink (binary unless set). */
  eventMode?: "binary" | "structured";
}

const defaultMaxBodySize = 32 * 2 ** 20;
export const defaultMaxHeldBytes = 256 * 2 ** 20;

function defined<T extends object>(object: T | undefined): Partial<T> {
  return Object.fromEntries(Object.entries(object ?? {}).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** The tier settings given in any of these (not built-in defaults), sorted. */
export function explicitTierKeys(...sources: (object | undefined)[]): string[] {
  const keys = new Set<string>();
  for (const source of sources)
    for (const key of Object.keys(defined(source))) if (key in builtinTierDefaults) keys.add(key);
  return [...keys].sort();
}

/**
 * Fills in defaults and checks what a per-field schema cannot: aliases that
 * collide, slots that do not exist, engines whose port cannot be known, two engines on one port.
 */
export function resolveConfig(file: SnoozeFile): { config: SnoozeConfig; problems: ConfigProblem[] } {
  const problems: ConfigProblem[] = [];
  const models = new Map<string, ModelConfig>();
  const names = new Map<string, string>();
  const slots = new Map<string, SlotConfig>();
  for (const [name, slot] of Object.entries(file.slots ?? {})) {
    slots.set(name, { ...builtinSlotDefaults, ...defined(slot), name });
  }
  for (const [id, model] of Object.entries(file.models)) {
    const merged = { ...builtinTierDefaults, ...defined(file.defaults), ...defined(model) };
    const config: ModelConfig = {
      ...merged,
      id,
      command: model.command,
      env: model.env ?? {},
      port: model.port,
      explicit: explicitTierKeys(file.defaults, model),
    };
    models.set(id, config);
    if (!model.port && !model.command.some((arg) => arg.includes("${PORT}"))) {
      problems.push({
        key: `models.${id}.command`,
        message:
          "the command must contain ${PORT} (the port Snooze picks for the engine), or the model must set `port`",
      });
    }
    if (config.slot !== undefined && !slots.has(config.slot)) {
      const known = [...slots.keys()];
      problems.push({
        key: `models.${id}.slot`,
        message: `slot "${config.slot}" is not defined under \`slots:\`${known.length ? ` (defined: ${known.join(", ")})` : ""}`,
      });
    }
  }
  const byPort = new Map<number, string>();
  for (const [id, model] of models) {
    if (model.port === undefined) continue;
    const owner = byPort.get(model.port);
    if (owner === undefined) byPort.set(model.port, id);
    else
      problems.push({
        key: `models.${id}.port`,
        message: `port ${model.port} is already the port of model "${owner}"; two engines cannot listen on one port`,
      });
  }
  for (const [id, model] of models) {
    for (const [index, name] of [id, ...model.aliases].entries()) {
      const owner = names.get(name);
      if (owner !== undefined && owner !== id) {
        problems.push({
          key: index === 0 ? `models.${id}` : `models.${id}.aliases.${index - 1}`,
          message: `"${name}" already names model "${owner}"; ids and aliases must be unique`,
        });
      } else names.set(name, id);
    }
  }
  return {
    config: {
      models,
      names,
      slots,
      hostMemoryBudget: file.hostMemoryBudget ?? Number.POSITIVE_INFINITY,
      maxBodySize: file.maxBodySize ?? defaultMaxBodySize,
      maxHeldBytes: file.maxHeldBytes ?? defaultMaxHeldBytes,
      eventSink: file.eventSink,
      eventMode: file.eventMode,
    },
    problems,
  };
}
