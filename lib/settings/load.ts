import { constants, type Stats } from "node:fs";
import { type FileHandle, open, stat } from "node:fs/promises";
import { isScalar, LineCounter, parseDocument, type YAMLError } from "yaml";
import type { z } from "zod";
import { formatSize } from "../format-size.ts";
import { redactUrl } from "../redact-url.ts";
import { notRegular } from "../small-file.ts";
import { fieldAt, keysOf, showValue } from "./allowed-form.ts";
import { ConfigError, type ConfigProblem, formatProblems, keyPath } from "./config-error.ts";
import { snoozeFile } from "./file.ts";
import { listFormOf } from "./list-form.ts";
import { type localModel, tierSettings } from "./model.ts";
import { spelledOut } from "./name-fold.ts";
import { nestingProblem } from "./nesting.ts";
import { inPlainWords } from "./plain-words.ts";
import { resolveConfig, type SnoozeConfig } from "./resolve.ts";
import { closestKey } from "./suggest.ts";
import { utf8Problem } from "./utf8.ts";
import { aliasProblems } from "./yaml-aliases.ts";
import { keyProblems, keysAsWritten } from "./yaml-keys.ts";
import { entryAt, ignoredOwnContent, keysInOrder, ownKeyPrefix, positionAt } from "./yaml-paths.ts";
import { tagProblems } from "./yaml-tags.ts";
import { yamlVersionProblem } from "./yaml-version.ts";

/** What a file is checked against besides itself. */
export interface LoadOptions {
  /** The port `snooze serve` listens on: no engine may take it as its fixed `port`. */
  listenPort?: number;
}

/**
 * The largest settings file Snooze reads: 1 MiB, a Kubernetes ConfigMap's own limit. A real one is
 * a few KiB (a hundred models fit in some 20 KiB); a larger file is another file given by mistake
 * (`-c model.safetensors`), which would otherwise be read whole into memory first.
 */
export const maxConfigBytes = 1024 * 1024;

/** Reads, validates and resolves a snooze.yaml; throws ConfigError naming file, line, key and reason. */
export async function loadConfigFile(path: string, options: LoadOptions = {}): Promise<SnoozeConfig> {
  return parseConfigBytes(await readConfigBytes(path), path, options);
}

/** `parseConfig` of a file's bytes, which must be UTF-8. */
export function parseConfigBytes(bytes: Uint8Array, path: string, options: LoadOptions = {}): SnoozeConfig {
  const notUtf8 = utf8Problem(bytes);
  if (notUtf8) throw new ConfigError(path, [notUtf8]);
  return parseConfig(
    Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("utf8"),
    path,
    options,
  );
}

/**
 * The bytes of the settings file at `path`, or a ConfigError saying why they cannot be: it cannot
 * be read (missing: its `cause` has the code `ENOENT`), is not a regular file (a directory, a named
 * pipe, a device such as /dev/zero), or is larger than `maxConfigBytes`. What the path names is
 * looked at before it is opened, so a named pipe never blocks the read (and with it the process's
 * exit); it is opened without blocking and looked at again (it may have been swapped meanwhile),
 * and read no further than the limit, so a file that grows as it is read is refused too.
 */
export async function readConfigBytes(path: string): Promise<Buffer> {
  const cannotRead = (error: unknown) =>
    new ConfigError(path, [{ key: "", message: `cannot read the file: ${(error as Error).message}` }], {
      cause: error,
    });
  const refuse = (stats: Stats) => {
    const problem = notASettingsFile(stats);
    if (problem) throw new ConfigError(path, [{ key: "", message: problem }]);
  };
  try {
    refuse(await stat(path));
  } catch (error) {
    throw error instanceof ConfigError ? error : cannotRead(error);
  }
  let file: FileHandle;
  try {
    file = await open(path, constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY);
  } catch (error) {
    throw cannotRead(error);
  }
  try {
    refuse(await file.stat());
    // One byte past the limit tells a file at the limit from one beyond it.
    const buffer = Buffer.alloc(maxConfigBytes + 1);
    let length = 0;
    for (;;) {
      const { bytesRead } = await file.read(buffer, length, buffer.length - length, null);
      if (bytesRead === 0) break;
      length += bytesRead;
      if (length > maxConfigBytes)
        throw new ConfigError(path, [
          {
            key: "",
            message: `the file grew past ${formatSize(maxConfigBytes)} as it was read; ${sizeAdvice}`,
          },
        ]);
    }
    return buffer.subarray(0, length);
  } catch (error) {
    throw error instanceof ConfigError ? error : cannotRead(error);
  } finally {
    await file.close().catch(() => {});
  }
}

const sizeAdvice = `a settings file may be at most ${formatSize(maxConfigBytes)} (is this the settings file?)`;

/** What is wrong with a path's file as a settings file, if anything: not a regular file, or too large. */
function notASettingsFile(stats: Stats): string | undefined {
  const what = notRegular(stats);
  if (what) return `it is ${what}, not a settings file: give the path of a YAML file`;
  if (stats.size > maxConfigBytes) return oversizeRefusal(stats.size);
  return undefined;
}

/** Why a file of `bytes`, over the limit, is no settings file (docs/configuration.md quotes it). */
export function oversizeRefusal(bytes: number): string {
  const [size, limit] = [formatSize(bytes), formatSize(maxConfigBytes)];
  return `the file is ${size === limit ? `more than ${limit}` : size}; ${sizeAdvice}`;
}

export { maxAliasCount } from "./yaml-aliases.ts";
export { ownKeyPrefix } from "./yaml-paths.ts";

export function parseConfig(raw: string, file = "snooze.yaml", options: LoadOptions = {}): SnoozeConfig {
  // A bare CR ends a line in YAML 1.2 (as LF and CRLF do), but the yaml library reads it as text:
  // a file saved with classic Mac OS line ends was one long line (found by an outside tester). Made
  // LF, one character for one, so every offset, line and column stays where it was.
  const text = raw.replace(/\r(?!\n)/g, "\n");
  // Refused with whatever else is wrong, all judged as YAML 1.2, so one run names every fix.
  const version = yamlVersionProblem(text);
  let config: SnoozeConfig;
  try {
    config = parseSettings(text, file, options);
  } catch (error) {
    if (version && error instanceof ConfigError)
      throw new ConfigError(file, [version, ...error.problems], { cause: error.cause });
    throw error;
  }
  if (version) throw new ConfigError(file, [version]);
  return config;
}

function parseSettings(text: string, file: string, options: LoadOptions): SnoozeConfig {
  try {
    return parseConfigText(text, file, options);
  } catch (error) {
    if (error instanceof ConfigError) throw error;
    // Nesting is bounded as written (`nestingProblem`), but aliases can stack anchors on each other.
    if (error instanceof RangeError && /call stack/i.test(error.message))
      throw new ConfigError(file, [
        { key: "", message: "the settings nest too deep once their aliases (*name) are expanded", ...start },
      ]);
    // Whatever the YAML library or a check trips over is still a problem in this file, not a crash.
    throw new ConfigError(file, [
      { key: "", message: `cannot read the settings: ${(error as Error).message}`, ...start },
    ]);
  }
}

/** Where a problem is reported when nothing more precise is known: the file's first character. */
const start = { line: 1, column: 1 };

function parseConfigText(text: string, file: string, { listenPort }: LoadOptions): SnoozeConfig {
  const tooDeep = nestingProblem(text);
  if (tooDeep) throw new ConfigError(file, [tooDeep]);
  const lines = new LineCounter();
  // Keys set twice are found by `keyProblems`, which can name them; merge keys (`<<: *base`) share
  // settings between models, as a reader of YAML expects.
  // The library's warnings (a key that is a list, under an ignored `x-` key) go nowhere: what
  // matters in them is reported here, in words for this file, and the rest is not read.
  // The core schema whatever a `%YAML 1.1` directive asks (it is refused in `parseConfig`): `yes` is
  // text, as it is in a file without the directive, so the same value never means two things.
  const doc = parseDocument(text, {
    lineCounter: lines,
    uniqueKeys: false,
    merge: true,
    schema: "core",
    logLevel: "error",
  });
  if (doc.errors.length > 0) {
    const textLines = text.split(/\r\n?|\n/);
    const hinted = new Set<number>();
    const problems = doc.errors.flatMap((error) => {
      const at = error.linePos?.[0];
      const line = at?.line ?? start.line;
      const placeholder = unquotedPlaceholder(textLines[line - 1] ?? "");
      // One mistake, told once: the parser goes on to trip over the rest of the line.
      if (placeholder && hinted.has(line)) return [];
      if (placeholder) hinted.add(line);
      return [
        {
          key: "",
          message:
            yamlErrorMessage(error) +
            (placeholder
              ? `; write it in quotes, "${placeholder}": in a list or mapping written in [ ] or { }, the { of \${…} begins a mapping`
              : ""),
          line,
          column: at?.col ?? start.column,
        },
      ];
    });
    // The parser can report one mistake several times over (`x: {{{` gave the same "Flow map ...
    // must end with a }" three times at one place; found by an outside tester): said once.
    const said = new Set<string>();
    throw new ConfigError(
      file,
      problems.filter((p) => {
        const key = `${p.line}:${p.column}:${p.message}`;
        return !said.has(key) && said.add(key);
      }),
    );
  }
  // No document at all, or `---` with nothing after it (an empty scalar, not a written `null`).
  const contents = doc.contents;
  if (contents === null || (isScalar(contents) && contents.value === null && contents.source === ""))
    throw new ConfigError(file, [
      { key: "", message: "the file is empty: it needs at least `models:` with one model", ...start },
    ]);
  const at = (offset: number | undefined) => (offset === undefined ? start : positionAt(lines, offset));
  // Aliases first: one that names nothing, or itself, would mislead every later check.
  const badAliases = aliasProblems(doc, lines);
  if (badAliases.length > 0) throw new ConfigError(file, badAliases);
  const ignored = ignoredOwnContent(doc);
  const shapeProblems = [...keyProblems(doc, lines, ignored), ...tagProblems(doc, lines, ignored)];
  if (shapeProblems.length > 0) throw new ConfigError(file, shapeProblems);
  const locate = (path: PropertyKey[]): Pick<ConfigProblem, "line" | "column"> => {
    // Point at the deepest entry that exists (a missing key is reported at its parent), at its key.
    const { key, value } = entryAt(doc, path);
    return at(key?.range?.[0] ?? value?.range?.[0]);
  };
  keysAsWritten(doc);
  // Ids and slot names in the file's order (a plain object would put `10` before `alpha`).
  const order = { models: keysInOrder(doc, ["models"]), slots: keysInOrder(doc, ["slots"]) };
  let data: unknown;
  try {
    // The aliases were counted above, exactly; the library's own count would add one for each
    // anchor (refusing 100 expansions) and multiply along a chain of anchors.
    data = doc.toJS({ maxAliasCount: -1 });
  } catch (error) {
    // Aliases with no anchor were refused above, at their keys; anything else is the library's.
    throw new ConfigError(file, [
      { key: "", message: `invalid YAML: ${(error as Error).message}`, ...start },
    ]);
  }
  data = withoutOwnKeys(data);
  const reserved = reservedNames(data);
  if (reserved.length > 0)
    throw new ConfigError(
      file,
      reserved.map(({ path, message }) => ({ key: keyPath(path), message, ...locate(path) })),
    );
  const parseOptions = { reportInput: true, error: inPlainWords(snoozeFile) };
  let parsed = snoozeFile.safeParse(data ?? {}, parseOptions);
  // `sleepAfter: 0` or `maxBodySize: 1048576` is a YAML number where the setting is written text
  // (a duration, a size, a name): take it as written and check it again, so the number is judged
  // as the setting's own form ("30" is then not a duration, and says so).
  if (!parsed.success && data && scalarsAsWritten(doc, data, parsed.error.issues))
    parsed = snoozeFile.safeParse(data, parseOptions);
  if (!parsed.success) {
    const written = (path: readonly PropertyKey[]) => {
      const { value } = entryAt(doc, path);
      return isScalar(value) && typeof value.value === "number" ? value.source : undefined;
    };
    const problems = distinct(parsed.error.issues.flatMap((issue) => toProblems(issue, locate, written)));
    // One line per problem, all at once: the checks across settings (colliding names, placeholders)
    // run too, on the file without the values already refused, when what is left still parses.
    const refused = refusedPaths(parsed.error.issues);
    const rest = snoozeFile.safeParse(withoutPaths(data, refused));
    if (rest.success)
      for (const { path, message } of resolveConfig(rest.data, { refused, order, listenPort }).problems)
        problems.push({ key: keyPath(path), message, ...locate(path) });
    throw new ConfigError(file, problems);
  }
  const { config, problems, unused } = resolveConfig(parsed.data, { order, listenPort });
  const located = (list: typeof problems) =>
    list.map(({ path, message }) => ({ key: keyPath(path), message, ...locate(path) }));
  if (problems.length > 0) throw new ConfigError(file, located(problems));
  if (unused.length > 0) config.warnings = formatProblems(file, located(unused));
  return config;
}

/**
 * The paths of the values zod refused: each unknown key on its own (the mapping that holds it is
 * fine otherwise, and a slot with a misspelt setting is still a slot).
 */
function refusedPaths(issues: readonly z.core.$ZodIssue[]): PropertyKey[][] {
  return issues.flatMap((issue) =>
    issue.code === "unrecognized_keys" ? issue.keys.map((key) => [...issue.path, key]) : [issue.path],
  );
}

/** A copy of `data` without the values at `paths` (list items taken out, later ones first). */
function withoutPaths(data: unknown, paths: readonly PropertyKey[][]): unknown {
  const copy = structuredClone(data);
  const deepestLast = [...paths].sort((a, b) => {
    const [x, y] = [a.at(-1), b.at(-1)];
    return typeof x === "number" && typeof y === "number" ? y - x : 0;
  });
  for (const path of deepestLast) {
    if (path.length === 0) return undefined;
    const parent = path
      .slice(0, -1)
      .reduce<unknown>((at, key) => (at as Record<PropertyKey, unknown>)?.[key], copy);
    const key = path.at(-1)!;
    if (Array.isArray(parent) && typeof key === "number") parent.splice(key, 1);
    else if (parent !== null && typeof parent === "object")
      delete (parent as Record<PropertyKey, unknown>)[key];
  }
  return copy;
}

/**
 * Replaces, in `data`, each YAML number the schema wanted as a string by its text as written in the
 * file (`0`, `1048576`, `0.5`), and each YAML boolean where the setting is a name (`aliases`,
 * `slot`: `slot: true` names the slot "true", as a key `true:` does); true when it replaced any.
 */
function scalarsAsWritten(
  doc: ReturnType<typeof parseDocument>,
  data: unknown,
  issues: readonly z.core.$ZodIssue[],
): boolean {
  let replaced = false;
  for (const issue of issues) {
    if (issue.code !== "invalid_type" || issue.expected !== "string") continue;
    if (typeof issue.input !== "number" && !(typeof issue.input === "boolean" && isNamePath(issue.path)))
      continue;
    const node = entryAt(doc, issue.path).value;
    const parent = issue.path
      .slice(0, -1)
      .reduce<unknown>((at, key) => (at as Record<PropertyKey, unknown>)?.[key], data);
    if (!isScalar(node) || typeof node.source !== "string" || parent === null || typeof parent !== "object")
      continue;
    (parent as Record<PropertyKey, unknown>)[issue.path.at(-1)!] = node.source;
    replaced = true;
  }
  return replaced;
}

/** Whether `path` is a name a model takes: an alias (`aliases.0`) or its slot, in a model or `defaults:`. */
function isNamePath(path: readonly PropertyKey[]): boolean {
  const setting = path[0] === "models" ? path.slice(2) : path[0] === "defaults" ? path.slice(1) : [];
  return (
    (setting.length === 1 && setting[0] === "slot") ||
    (setting.length === 2 && setting[0] === "aliases" && typeof setting[1] === "number")
  );
}

function toProblems(
  issue: z.core.$ZodIssue,
  locate: (path: PropertyKey[]) => Pick<ConfigProblem, "line" | "column">,
  written: (path: readonly PropertyKey[]) => string | undefined,
): ConfigProblem[] {
  const path = issue.path;
  // One line per unknown key, each at the key itself: zod lists a mapping's unknown keys together.
  if (issue.code === "unrecognized_keys")
    return issue.keys.map((key) => ({
      key: keyPath([...path, key]),
      message: unknownKeyMessage(key, path),
      ...locate([...path, key]),
    }));
  let message: string;
  if (issue.code === "invalid_key") {
    // A name zod refused as a record key ("Invalid key in record"): say what its own check said.
    const reasons = issue.issues.map((inner) => inner.message);
    message = issue.input === "" ? "a name may not be empty" : reasons.join("; ") || "not a valid name";
  } else if (issue.code === "invalid_type" && issue.input === undefined) message = "is required";
  else {
    // Every reason names the value found, as written (`1e400`, not the Infinity it reads as).
    const reason = issue.message;
    const value =
      (typeof issue.input === "number" ? written(path) : undefined) ??
      showValue(typeof issue.input === "string" ? redactUrl(issue.input) : issue.input);
    message =
      issue.input === undefined || (issue.code === "custom" && issue.params?.standalone)
        ? reason
        : issue.code === "custom" && issue.params?.valueFirst
          ? `${value} ${reason}`
          : `${reason}, not ${value}`;
    // YAML 1.1 (and many a YAML file) reads these as booleans; YAML 1.2, as this file is read, does not.
    if (
      issue.code === "invalid_type" &&
      issue.expected === "boolean" &&
      typeof issue.input === "string" &&
      yaml11Booleans.has(issue.input)
    )
      message += ` (in YAML 1.2, as settings files are read, ${value} is text: write ${
        yaml11True.has(issue.input) ? "true" : "false"
      })`;
    // `sleepAfter:` with nothing after the colon reads as null: a key left empty, likely meaning
    // "the default", which leaving the key out gives (when the setting has one).
    if (
      issue.code === "invalid_type" &&
      issue.input === null &&
      fieldAt(snoozeFile, path)?.safeParse(undefined).success
    )
      message +=
        "; a key with nothing after its colon is null: write a value, or leave the key out for the default";
    // A text where a list goes (`command: "vllm serve m --port ${PORT}"`): the list it meant.
    if (issue.code === "invalid_type" && issue.expected === "array" && typeof issue.input === "string")
      message += `; write it as a list, one word an item: ${String(path.at(-1))}: ${listFormOf(issue.input)}`;
  }
  return [{ key: keyPath(path), message, ...locate(path) }];
}

/**
 * The item holding the first `${…}` a line writes outside quotes, if any. Written so in a flow list or mapping
 * (`command: [vllm, serve, --port, ${PORT}]`), its `{` begins a flow mapping, and the parser's
 * words ("Missing , or : between flow sequence items") did not say what to change (found by an
 * outside tester). Outside flow context (`- ${PORT}`) it is read as text, and no error comes.
 */
function unquotedPlaceholder(line: string): string | undefined {
  let quote: string | undefined;
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (quote === '"' && c === "\\") i++;
    else if (quote !== undefined) {
      if (c === quote) quote = undefined;
    } else if (c === "#" && (i === 0 || /\s/.test(line[i - 1]!))) return undefined;
    else if ((c === '"' || c === "'") && (i === 0 || /[\s[{,:]/.test(line[i - 1]!))) quote = c;
    else if (c === "$" && line[i + 1] === "{") {
      // The whole item it is in, to quote (`--port=${PORT}`).
      let from = i;
      while (from > 0 && !/[\s,[{]/.test(line[from - 1]!)) from--;
      return /^(?:\$\{[^}\s]*\}?|[^\s,[\]{}])+/.exec(line.slice(from))![0];
    }
  }
  return undefined;
}

/** The words YAML 1.1 reads as true (and false) which YAML 1.2 reads as text. */
const yaml11True = new Set(["y", "Y", "yes", "Yes", "YES", "on", "On", "ON"]);
const yaml11Booleans = new Set([...yaml11True, "n", "N", "no", "No", "NO", "off", "Off", "OFF"]);

/**
 * What the YAML parser found wrong, in words for this file. The place is already in
 * file:line:col; the parser's own "at line L, column C:" (with its snippet on the next lines) would
 * only repeat it.
 */
function yamlErrorMessage(error: YAMLError): string {
  // The parser's own words here are advice to a programmer (use parseAllDocuments()).
  if (error.code === "MULTIPLE_DOCS")
    return "the settings file must be one YAML document, but a second one starts here (after `---` or `...`)";
  return `invalid YAML: ${error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`;
}

function withoutOwnKeys(data: unknown): unknown {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return data;
  return Object.fromEntries(Object.entries(data).filter(([key]) => !key.startsWith(ownKeyPrefix)));
}

/**
 * `__proto__` written as a model id, a slot name or an `env` name: the settings are JavaScript
 * objects, in which that key is the object's prototype, so the schema drops it and the model (slot,
 * variable) would be gone without a word (found by an outside tester). Refused, where it is written.
 */
function reservedNames(data: unknown): { path: string[]; message: string }[] {
  const name = "__proto__";
  const has = (value: unknown): value is Record<string, unknown> =>
    value !== null && typeof value === "object" && !Array.isArray(value);
  const problems: { path: string[]; message: string }[] = [];
  const refuse = (path: string[], what: string) =>
    problems.push({
      path,
      message: `"${name}" cannot be ${what}: Snooze's settings are JavaScript objects, in which it is reserved; choose another name`,
    });
  if (!has(data)) return problems;
  const { models, slots } = data;
  if (has(models)) {
    for (const [id, model] of Object.entries(models)) {
      if (id === name) refuse(["models", id], "a model id");
      if (has(model) && has(model.env) && Object.hasOwn(model.env, name))
        refuse(["models", id, "env", name], "the name of an environment variable here");
    }
  }
  if (has(slots) && Object.hasOwn(slots, name)) refuse(["slots", name], "a slot name");
  return problems;
}

/** The top level's keys that hold sections, not settings: `slots` under a model meant `slot`, say. */
const sections = new Set(["models", "defaults", "slots"]);

/**
 * `unknown key "sleepAftr"`, with the known key at that level it most likely meant; a model's own
 * setting in `defaults:` or at the top level, and a tier setting at the top level, say where they go.
 */
function unknownKeyMessage(key: string, path: readonly PropertyKey[]): string {
  const inDefaults = path.length === 1 && path[0] === "defaults";
  if ((inDefaults || path.length === 0) && Object.hasOwn(engineKeyAdvice, key))
    return `unknown key "${key}" ${inDefaults ? "in defaults" : "at the top level"}: ${engineKeyAdvice[key]}`;
  if (path.length === 0 && Object.hasOwn(tierSettings.shape, key))
    return `unknown key "${key}" at the top level: a model's setting goes under \`defaults:\` (for every model) or under the model, in \`models:\``;
  // The reverse: a setting of the whole server (`maxBodySize`) written under a model or defaults.
  const underModel = path.length === 2 && path[0] === "models";
  if ((inDefaults || underModel) && !sections.has(key) && keysOf(fieldAt(snoozeFile, [])).includes(key))
    return `unknown key "${key}" ${inDefaults ? "in defaults" : "under a model"}: it is a setting of the whole server, written at the top level of the file`;
  // Every known key is plain ASCII: any other character is spelled out, so that a look-alike
  // (`slееpAfter`, with Cyrillic е) or a character that does not show is seen to differ from the key
  // suggested (found by an outside tester: the refusal read as one of the very key it suggested).
  const written = /^[\x20-\x7e]*$/.test(key) ? `"${key}"` : spelledOut(key);
  const near = closestKey(key, keysOf(fieldAt(snoozeFile, path)));
  if (near) return `unknown key ${written}; did you mean "${near}"?`;
  if (path.length === 0)
    return `unknown key ${written} (a key of your own, such as an anchor to share, starts with "${ownKeyPrefix}")`;
  return `unknown key ${written}`;
}

/**
 * Where the settings of one model's engine go, which `defaults:` does not take (each model runs an
 * engine of its own), and how to share them all the same. One entry per key a model has beyond the
 * tier settings (`satisfies` keeps the two lists equal).
 */
const engineKeyAdvice = {
  command:
    'a model\'s engine command is set on the model, under `models.<id>`; to share one, anchor it under a top-level `x-` key, with ${MODEL} where the model\'s id goes (`x-vllm: &vllm [vllm, serve, "${MODEL}", --port, "${PORT}"]`), and write `command: *vllm` in each model',
  env: "a model's engine environment is set on the model, under `models.<id>`; to share it, anchor it under a top-level `x-` key (`x-env: &env {HF_HOME: /models}`) and write `env: *env` in each model",
  port: "a fixed port is one engine's, set on the model that needs it, under `models.<id>` (two models may not share one); without it each engine gets a free port",
} satisfies Record<Exclude<keyof typeof localModel.shape, keyof typeof tierSettings.shape>, string> as Record<
  string,
  string
>;

/** The problems without repeats: two checks of one value can say the same thing (an integer's two bounds). */
function distinct(problems: ConfigProblem[]): ConfigProblem[] {
  const seen = new Set<string>();
  return problems.filter((p) => {
    const id = `${p.key}\0${p.message}`;
    if (seen.has(id)) return false;
    seen.add(id);
    return true;
  });
}
