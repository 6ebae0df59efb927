import { readFile } from "node:fs/promises";
import {
  type Alias,
  isAlias,
  isScalar,
  LineCounter,
  type Node,
  parseDocument,
  visit,
  type YAMLError,
} from "yaml";
import type { z } from "zod";
import { fieldAt, keysOf, showValue } from "./allowed-form.ts";
import { ConfigError, type ConfigProblem, formatProblems, keyPath } from "./config-error.ts";
import { snoozeFile } from "./file.ts";
import { nestingProblem } from "./nesting.ts";
import { inPlainWords } from "./plain-words.ts";
import { resolveConfig, type SnoozeConfig } from "./resolve.ts";
import { closestKey } from "./suggest.ts";
import { utf8Problem } from "./utf8.ts";
import { keyProblems, keysAsWritten } from "./yaml-keys.ts";
import { entryAt } from "./yaml-paths.ts";
import { tagProblems } from "./yaml-tags.ts";

/** Reads, validates and resolves a snooze.yaml; throws ConfigError naming file, line, key and reason. */
export async function loadConfigFile(path: string): Promise<SnoozeConfig> {
  let bytes: Buffer;
  try {
    bytes = await readFile(path);
  } catch (error) {
    throw new ConfigError(path, [{ key: "", message: `cannot read the file: ${(error as Error).message}` }]);
  }
  const notUtf8 = utf8Problem(bytes);
  if (notUtf8) throw new ConfigError(path, [notUtf8]);
  return parseConfig(bytes.toString("utf8"), path);
}

/** Alias expansions a file may make in all (YAML's guard against "billion laughs" alias bombs). */
export const maxAliasCount = 100;

export function parseConfig(text: string, file = "snooze.yaml"): SnoozeConfig {
  try {
    return parseConfigText(text, file);
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

function parseConfigText(text: string, file: string): SnoozeConfig {
  const tooDeep = nestingProblem(text);
  if (tooDeep) throw new ConfigError(file, [tooDeep]);
  const lines = new LineCounter();
  // Keys set twice are found by `keyProblems`, which can name them; merge keys (`<<: *base`) share
  // settings between models, as a reader of YAML expects.
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: false, merge: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((error) => {
        const at = error.linePos?.[0];
        return {
          key: "",
          message: yamlErrorMessage(error),
          line: at?.line ?? start.line,
          column: at?.col ?? start.column,
        };
      }),
    );
  }
  // No document at all, or `---` with nothing after it (an empty scalar, not a written `null`).
  const contents = doc.contents;
  if (contents === null || (isScalar(contents) && contents.value === null && contents.source === ""))
    throw new ConfigError(file, [
      { key: "", message: "the file is empty: it needs at least `models:` with one model", ...start },
    ]);
  const at = (offset: number | undefined) => {
    if (offset === undefined) return start;
    const pos = lines.linePos(offset);
    return { line: pos.line, column: pos.col };
  };
  const shapeProblems = [...keyProblems(doc, lines), ...tagProblems(doc, lines)];
  if (shapeProblems.length > 0) throw new ConfigError(file, shapeProblems);
  const locate = (path: PropertyKey[]): Pick<ConfigProblem, "line" | "column"> => {
    // Point at the deepest entry that exists (a missing key is reported at its parent), at its key.
    const { key, value } = entryAt(doc, path);
    return at(key?.range?.[0] ?? value?.range?.[0]);
  };
  const bomb = aliasPastLimit(doc);
  if (bomb)
    throw new ConfigError(file, [
      {
        key: "",
        message: `the aliases (*name) expand to too much: at most ${maxAliasCount} expansions in all (an alias bomb?)`,
        ...at(bomb.range?.[0]),
      },
    ]);
  keysAsWritten(doc);
  let data: unknown;
  try {
    // The aliases were counted above, exactly; the library's own count would add one for each
    // anchor (refusing 100 expansions) and multiply along a chain of anchors.
    data = doc.toJS({ maxAliasCount: -1 });
  } catch (error) {
    // An alias with no anchor: point at it, else at the file's start.
    let alias: number | undefined;
    visit(doc, {
      Alias(_, node) {
        if (node.resolve(doc) !== undefined) return undefined;
        alias = node.range?.[0];
        return visit.BREAK;
      },
    });
    throw new ConfigError(file, [
      { key: "", message: `invalid YAML: ${(error as Error).message}`, ...at(alias) },
    ]);
  }
  data = withoutOwnKeys(data);
  const parseOptions = { reportInput: true, error: inPlainWords(snoozeFile) };
  let parsed = snoozeFile.safeParse(data ?? {}, parseOptions);
  // `sleepAfter: 0` or `maxBodySize: 1048576` is a YAML number where the setting is written text
  // (a duration, a size, a name): take it as written and check it again, so the number is judged
  // as the setting's own form ("30" is then not a duration, and says so).
  if (!parsed.success && data && numbersAsWritten(doc, data, parsed.error.issues))
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
      for (const { path, message } of resolveConfig(rest.data, { refused }).problems)
        problems.push({ key: keyPath(path), message, ...locate(path) });
    throw new ConfigError(file, problems);
  }
  const { config, problems, unused } = resolveConfig(parsed.data);
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
 * file (`0`, `1048576`, `0.5`); true when it replaced any.
 */
function numbersAsWritten(
  doc: ReturnType<typeof parseDocument>,
  data: unknown,
  issues: readonly z.core.$ZodIssue[],
): boolean {
  let replaced = false;
  for (const issue of issues) {
    if (issue.code !== "invalid_type" || issue.expected !== "string" || typeof issue.input !== "number")
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
    const value = (typeof issue.input === "number" ? written(path) : undefined) ?? showValue(issue.input);
    message =
      issue.input === undefined
        ? reason
        : issue.code === "custom" && issue.params?.valueFirst
          ? `${value} ${reason}`
          : `${reason}, not ${value}`;
  }
  return [{ key: keyPath(path), message, ...locate(path) }];
}

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

/**
 * The alias at which the aliases (`*name`) of `doc` have expanded more than `maxAliasCount` times in
 * all, in the order they are written, or undefined when they stay within it. An alias expands once,
 * plus once for every alias inside what it names (so an alias bomb's nested anchors count as the
 * copies they make); one inside the very anchor it names would expand without end.
 */
function aliasPastLimit(doc: ReturnType<typeof parseDocument>): Alias | undefined {
  // An alias names the last node with its anchor written before it (as the YAML library resolves it).
  const target = new Map<Alias, Node | undefined>();
  const latest = new Map<string, Node>();
  visit(doc, {
    Node(_, node) {
      if (isAlias(node)) target.set(node, latest.get(node.source));
      else if (node.anchor) latest.set(node.anchor, node);
    },
  });
  const weights = new Map<Node, number>();
  /** Expansions one copy of `node` makes (Infinity for an anchor that holds an alias to itself). */
  const weightOf = (node: Node | undefined): number => {
    if (node === undefined) return 0;
    const known = weights.get(node);
    if (known !== undefined) return known;
    weights.set(node, Number.POSITIVE_INFINITY); // until computed: a cycle back here never ends
    let weight = 0;
    visit(node, {
      Alias(_, alias) {
        weight += 1 + weightOf(target.get(alias));
      },
    });
    weights.set(node, weight);
    return weight;
  };
  let total = 0;
  for (const [alias, node] of target) {
    total += 1 + weightOf(node);
    if (total > maxAliasCount) return alias;
  }
  return undefined;
}

/** Top-level keys of the user's own, ignored: a place for anchors that models share (`x-vllm: &vllm`). */
export const ownKeyPrefix = "x-";

function withoutOwnKeys(data: unknown): unknown {
  if (data === null || typeof data !== "object" || Array.isArray(data)) return data;
  return Object.fromEntries(Object.entries(data).filter(([key]) => !key.startsWith(ownKeyPrefix)));
}

/** `unknown key "sleepAftr"`, with the known key at that level it most likely meant. */
function unknownKeyMessage(key: string, path: readonly PropertyKey[]): string {
  const near = closestKey(key, keysOf(fieldAt(snoozeFile, path)));
  if (near) return `unknown key "${key}"; did you mean "${near}"?`;
  if (path.length === 0)
    return `unknown key "${key}" (a key of your own, such as an anchor to share, starts with "${ownKeyPrefix}")`;
  return `unknown key "${key}"`;
}

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
