import type { SnoozeFile } from "./file.ts";
import { builtinTierDefaults, type ResolvedTierSettings } from "./model.ts";
import { foldedName, lookAlikeMessage, nearSlotMessage, slotLookAlikeMessage } from "./name-fold.ts";
import { placeholderProblem, placeholdersIn } from "./placeholders.ts";
import { servedNames, vllmWithoutSleepMode } from "./served-names.ts";
import { builtinSlotDefaults } from "./slot.ts";
import { cudaDevicesEnv, deviceCudaCannotRead, replacedDeviceEnv } from "./slot-device.ts";
import { unusedSettings } from "./unused-settings.ts";

/** A model ready to run: every tier setting filled in (times in ms, sizes in bytes). */
export interface ModelConfig extends ResolvedTierSettings {
  id: string;
  /** The name the engine serves when it is not `id` (a Model's `servedModel`): warm-ups and forwarded bodies use it. */
  servedModel?: string;
  command: string[];
  env: Record<string, string>;
  port?: number;
  /**
   * The one GPU of the model's slot (`slots.<slot>.device`), when the slot names one: a local engine
   * runs on it alone (`CUDA_VISIBLE_DEVICES`). An engine setting, since a running engine cannot move.
   */
  device?: string;
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
  /** How long a body being read may go without bringing 1 KiB (default 10s; Infinity: never). */
  bodyTimeout?: number;
  eventSink?: string;
  /** How CloudEvents go to the sink (binary unless set). */
  eventMode?: "binary" | "structured";
  /** Settings written that never take effect, as `file:line:col: key: why` (unused-settings.ts). */
  warnings?: readonly string[];
}

const defaultMaxBodySize = 32 * 2 ** 20;
export const defaultMaxHeldBytes = 256 * 2 ** 20;
export const defaultBodyTimeout = 10_000;

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

/** A setting that cannot work, at its path in the file (`["models", "qwen2.5", "command", 3]`). */
export interface ResolveProblem {
  path: (string | number)[];
  message: string;
}

/** What the checks across settings need to know of a file some of whose values were refused. */
export interface ResolveOptions {
  /**
   * Paths of values that were written but refused, and so left out of `file`: what they name is
   * there, only wrong, so a check does not also call it missing (a slot with a bad setting is
   * still defined).
   */
  refused?: readonly (readonly PropertyKey[])[];
  /**
   * Model ids and slot names in the order the file writes them: a parsed object lists integer-like
   * keys (`10`) first, whatever their place. Names not listed follow, in the object's order.
   */
  order?: { models?: readonly string[]; slots?: readonly string[] };
  /**
   * The port `snooze serve` listens on, when known: an engine given it as its fixed `port` could
   * never bind it (vLLM binds every interface by default, so whatever the hosts).
   */
  listenPort?: number;
}

/** The entries of `record`, those named in `order` first and in that order. */
function entriesInOrder<T>(record: Record<string, T>, order: readonly string[] = []): [string, T][] {
  const keys = new Set([...order.filter((key) => Object.hasOwn(record, key)), ...Object.keys(record)]);
  return [...keys].map((key) => [key, record[key]!]);
}

/**
 * The refused paths, indexed once: asked for every model, a scan of them all made a file of 18,000
 * models with a mistake in each take 16 s to be refused (quadratic), 1 s for 4,500.
 */
function refusedIndex(refused: readonly (readonly PropertyKey[])[]) {
  const key = (path: readonly PropertyKey[]) => JSON.stringify(path);
  const at = new Set(refused.map(key));
  const above = new Set<string>();
  for (const path of refused) for (let i = 0; i <= path.length; i++) above.add(key(path.slice(0, i)));
  return {
    /** Whether a value at `path` or above it was refused. */
    wasRefused: (path: readonly PropertyKey[]) => {
      for (let i = 0; i <= path.length; i++) if (at.has(key(path.slice(0, i)))) return true;
      return false;
    },
    /** Whether a value at or under `path` was refused. */
    refusedWithin: (path: readonly PropertyKey[]) => above.has(key(path)),
  };
}

/**
 * Fills in defaults and checks what a per-field schema cannot: aliases that
 * collide, slots that do not exist, engines whose port cannot be known, two engines on one port,
 * placeholders that are not.
 */
export function resolveConfig(
  file: SnoozeFile,
  { refused = [], order = {}, listenPort }: ResolveOptions = {},
): { config: SnoozeConfig; problems: ResolveProblem[]; unused: ResolveProblem[] } {
  const problems: ResolveProblem[] = [];
  const unused: ResolveProblem[] = [];
  const { wasRefused, refusedWithin } = refusedIndex(refused);
  // Aliases name one model: in `defaults:` every model would get the same ones, which always collide.
  if (file.defaults?.aliases !== undefined)
    problems.push({
      path: ["defaults", "aliases"],
      message: "aliases name one model, so they cannot be defaults: set them on each model",
    });
  const defaults = defined({ ...file.defaults, aliases: undefined });
  const models = new Map<string, ModelConfig>();
  const names = new Map<string, string>();
  const slots = new Map<string, SlotConfig>();
  // Slot names that look like one name (see `foldedName`), by that form: the later ones are refused.
  const slotByFolded = new Map<string, string>();
  for (const [name, slot] of entriesInOrder(file.slots ?? {}, order.slots)) {
    slots.set(name, { ...builtinSlotDefaults, ...defined(slot), name });
    const unreadable = deviceCudaCannotRead(slot.device);
    if (unreadable) unused.push({ path: ["slots", name, "device"], message: unreadable });
    const first = slotByFolded.get(foldedName(name));
    if (first === undefined) slotByFolded.set(foldedName(name), name);
    else problems.push({ path: ["slots", name], message: slotLookAlikeMessage(name, first) });
  }
  const checkSlot = (slot: string | undefined, path: string[]) => {
    if (slot === undefined || slots.has(slot) || wasRefused(["slots", slot])) return;
    if (problems.some((p) => p.path.join("\0") === path.join("\0"))) return;
    // Named as a defined slot looks (`GPU0` for `gpu0`, `café` in another Unicode form): said so,
    // as "not defined (defined: café)" read as a contradiction.
    const near = slotByFolded.get(foldedName(slot));
    if (near !== undefined) {
      problems.push({ path, message: nearSlotMessage(slot, near) });
      return;
    }
    const known = [...slots.keys()];
    problems.push({
      path,
      message: `slot "${slot}" is not defined under \`slots:\`${known.length ? ` (defined: ${known.join(", ")})` : ""}`,
    });
  };
  for (const [id, model] of entriesInOrder(file.models, order.models)) {
    const merged = { ...builtinTierDefaults, ...defaults, ...defined(model) };
    const config: ModelConfig = {
      ...merged,
      id,
      command: model.command,
      env: model.env ?? {},
      port: model.port,
      explicit: explicitTierKeys(file.defaults, model),
    };
    const device = merged.slot === undefined ? undefined : slots.get(merged.slot)?.device;
    if (device !== undefined) config.device = device;
    models.set(id, config);
    const replaced = replacedDeviceEnv(model.env, device);
    if (replaced) unused.push({ path: ["models", id, "env", cudaDevicesEnv], message: replaced });
    for (const { key, message } of unusedSettings(model, config))
      unused.push({ path: ["models", id, key], message });
    // Requests (by an alias too: it is rewritten) and the warm-up name the model by its id. A vLLM
    // that serves it under another name answers each with a 404, found only after the weights
    // loaded (found by an outside tester: `vllm serve Qwen/Qwen3-8B` for a model `qwen`).
    const served = servedNames(config.command, id);
    if (served && !served.includes(id))
      unused.push({
        path: ["models", id, "command"],
        message: `the engine serves the model as ${served.map((name) => JSON.stringify(name)).join(", ") || "no name"}, but Snooze asks for it as ${JSON.stringify(id)} (its id), which vLLM answers with a 404: add --served-model-name "\${MODEL}" (or rename the model)`,
      });
    // Without the flag vLLM has no sleep endpoints: each sleep fails and the engine is stopped
    // instead, so the model goes ready -> cold with a failure each time (found by an outside tester).
    if (config.sleep && vllmWithoutSleepMode(config.command))
      unused.push({
        path: ["models", id, "command"],
        message:
          "`sleep` is true, but this `vllm serve` has no --enable-sleep-mode, without which vLLM serves no sleep endpoints: each sleep would fail and stop the engine instead; add --enable-sleep-mode, or set `sleep: false`",
      });
    const values = [...config.command, ...Object.values(config.env)];
    // A `port` or `env` value refused already (a port of 70000) is told once: not also as missing.
    const portRefused = refusedWithin(["models", id, "port"]) || refusedWithin(["models", id, "env"]);
    if (!model.port && !portRefused && !values.some((text) => placeholdersIn(text).includes("PORT"))) {
      problems.push({
        path: ["models", id, "command"],
        message:
          "the command (or a value in `env`) must contain ${PORT} (the port Snooze picks for the engine), or the model must set `port`",
      });
    }
    // A NUL cannot pass to a process (its arguments and environment are C strings), nor `=` into
    // a variable's name: the engine could not be started at all (found by an outside tester: such a
    // file loaded, and every start of the model failed).
    // An empty program was spawned all the same, and the engine's process guard then answered each
    // start with its own usage line (found by an outside tester).
    for (const [index, arg] of config.command.entries()) {
      const message =
        index === 0 && arg === ""
          ? "the program to run (the command's first entry) is empty: name it, as in [vllm, serve, ...] or a path to it"
          : arg.includes("\0")
            ? "an argument may not hold a NUL character (\\0): no process can be given one"
            : placeholderProblem(arg, { in: "command" });
      if (message) problems.push({ path: ["models", id, "command", index], message });
    }
    for (const [name, value] of Object.entries(config.env)) {
      const message =
        name === "" || name.includes("=") || name.includes("\0")
          ? `${JSON.stringify(name)} cannot name an environment variable: a name must not be empty nor hold "=" or a NUL character (\\0)`
          : value.includes("\0")
            ? "an environment value may not hold a NUL character (\\0): no process can be given one"
            : placeholderProblem(value, { in: "env" });
      if (message) problems.push({ path: ["models", id, "env", name], message });
    }
    // Named where it is written: a slot a model inherits from `defaults:` is wrong there, once.
    checkSlot(config.slot, model.slot === undefined ? ["defaults", "slot"] : ["models", id, "slot"]);
  }
  // Also when every model names its own: the next model added would inherit it.
  checkSlot(file.defaults?.slot, ["defaults", "slot"]);
  // A slot no model names governs nothing: most often a model's `slot:` was meant to name it (a
  // misspelt one is refused above only when it names no slot at all).
  const members = new Set([...models.values()].map((model) => model.slot));
  for (const name of slots.keys())
    if (!members.has(name))
      unused.push({
        path: ["slots", name],
        message: "no model names this slot in `slot:`, so its settings govern no model",
      });
  const byPort = new Map<number, string>();
  for (const [id, model] of models) {
    if (model.port === undefined) continue;
    if (model.port === listenPort) {
      problems.push({
        path: ["models", id, "port"],
        message: `port ${model.port} is the port Snooze itself listens on (\`snooze serve --port\`); the engine could never bind it: give it another`,
      });
      continue;
    }
    const owner = byPort.get(model.port);
    if (owner === undefined) byPort.set(model.port, id);
    else
      problems.push({
        path: ["models", id, "port"],
        message: `port ${model.port} is already the port of model "${owner}"; two engines cannot listen on one port`,
      });
  }
  // Host routing ignores case (`Qwen.models.example` is `qwen`'s), and names equal in Unicode NFKC
  // look like one name (see `foldedName`): names of different models must differ in more.
  const byFoldedName = new Map<string, { name: string; id: string }>();
  for (const [id, model] of models) {
    for (const [index, name] of [id, ...model.aliases].entries()) {
      const path = index === 0 ? ["models", id] : ["models", id, "aliases", index - 1];
      const owner = names.get(name);
      const folded = byFoldedName.get(foldedName(name));
      // The same name twice in one model (`aliases: [q, q]`, or its own id) is a slip, not a second way in.
      if (owner === id) {
        problems.push({
          path,
          message: `"${name}" already names this model${name === id ? " (its id)" : ""}; ids and aliases must be unique`,
        });
        continue;
      }
      if (owner !== undefined) {
        problems.push({
          path,
          message: `"${name}" already names model "${owner}"; ids and aliases must be unique`,
        });
        continue;
      }
      if (owner === undefined && folded !== undefined && folded.id !== id) {
        problems.push({ path, message: lookAlikeMessage(name, folded) });
        continue;
      }
      names.set(name, id);
      if (folded === undefined) byFoldedName.set(foldedName(name), { name, id });
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
      bodyTimeout: file.bodyTimeout ?? defaultBodyTimeout,
      eventSink: file.eventSink,
      eventMode: file.eventMode,
    },
    problems,
    unused,
  };
}
