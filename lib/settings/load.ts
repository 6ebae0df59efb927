import { readFile } from "node:fs/promises";
import { isCollection, isNode, isScalar, LineCounter, parseDocument, visit } from "yaml";
import type { z } from "zod";
import { fieldAt, reasonFor, showValue } from "./allowed-form.ts";
import { ConfigError, type ConfigProblem } from "./config-error.ts";
import { snoozeFile } from "./file.ts";
import { resolveConfig, type SnoozeConfig } from "./resolve.ts";
import { utf8Problem } from "./utf8.ts";

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
    // Whatever the YAML library or a check trips over is still a problem in this file, not a crash.
    throw new ConfigError(file, [
      { key: "", message: `cannot read the settings: ${(error as Error).message}`, ...start },
    ]);
  }
}

/** Where a problem is reported when nothing more precise is known: the file's first character. */
const start = { line: 1, column: 1 };

function parseConfigText(text: string, file: string): SnoozeConfig {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((error) => {
        const at = error.linePos?.[0];
        return {
          key: "",
          // The place is already in file:line:col; the parser's own "at line L, column C:" (with its
          // snippet on the next lines) would only repeat it.
          message: `invalid YAML: ${error.message.split("\n")[0]!.replace(/ at line \d+, column \d+:?$/, "")}`,
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
  const keyProblems: ConfigProblem[] = [];
  visit(doc, {
    Pair(_, pair) {
      // A mapping key that is itself a list or a mapping (`? [a, b]`) names no setting.
      if (isCollection(pair.key))
        keyProblems.push({
          key: "",
          message: "a key must be a plain name, not a list or a mapping",
          ...at(pair.key.range?.[0]),
        });
    },
  });
  if (keyProblems.length > 0) throw new ConfigError(file, keyProblems);
  const locate = (path: PropertyKey[]): Pick<ConfigProblem, "line" | "column"> => {
    // Point at the deepest node that exists: a missing key is reported at its parent.
    for (let depth = path.length; depth >= 0; depth--) {
      const node = doc.getIn(path.slice(0, depth) as unknown[], true);
      if (isNode(node) && node.range) return at(keyOffset(doc, path.slice(0, depth)) ?? node.range[0]);
    }
    return start;
  };
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount });
  } catch (error) {
    // An alias bomb (anchors that expand to more than the limit) or an alias with no anchor.
    // Point at the alias with no anchor, else at the first alias.
    let alias: number | undefined;
    visit(doc, {
      Alias(_, node) {
        if (alias === undefined) alias = node.range?.[0];
        if (node.resolve(doc) === undefined) {
          alias = node.range?.[0];
          return visit.BREAK;
        }
        return undefined;
      },
    });
    const message = /excessive alias count/i.test((error as Error).message)
      ? `the aliases (*name) expand to too much: at most ${maxAliasCount} expansions in all (an alias bomb?)`
      : `invalid YAML: ${(error as Error).message}`;
    throw new ConfigError(file, [{ key: "", message, ...at(alias) }]);
  }
  let parsed = snoozeFile.safeParse(data ?? {}, { reportInput: true });
  // `sleepAfter: 0` or `maxBodySize: 1048576` is a YAML number where the setting is written text
  // (a duration, a size, a name): take it as written and check it again, so the number is judged
  // as the setting's own form ("30" is then not a duration, and says so).
  if (!parsed.success && data && numbersAsWritten(doc, data, parsed.error.issues))
    parsed = snoozeFile.safeParse(data, { reportInput: true });
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => toProblem(issue, locate));
    // One line per problem, all at once: the checks across settings (colliding names, placeholders)
    // run too, on the file without the values already refused, when what is left still parses.
    const rest = snoozeFile.safeParse(
      withoutPaths(
        data,
        parsed.error.issues.map((i) => i.path),
      ),
    );
    if (rest.success)
      for (const { path, message } of resolveConfig(rest.data).problems)
        problems.push({ key: keyPath(path), message, ...locate(path) });
    throw new ConfigError(file, problems);
  }
  const { config, problems } = resolveConfig(parsed.data);
  if (problems.length > 0) {
    throw new ConfigError(
      file,
      problems.map(({ path, message }) => ({ key: keyPath(path), message, ...locate(path) })),
    );
  }
  return config;
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
    const node = doc.getIn(issue.path as unknown[], true);
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

/** The offset of the key (not the value) of a mapping entry, so errors point at `sleepAfter:`. */
function keyOffset(doc: ReturnType<typeof parseDocument>, path: PropertyKey[]): number | undefined {
  if (path.length === 0) return undefined;
  const parent = doc.getIn(path.slice(0, -1) as unknown[], true) as {
    items?: { key?: { value?: unknown; range?: number[] } }[];
  };
  const pair = parent?.items?.find((item) => item.key?.value === path.at(-1));
  return pair?.key?.range?.[0];
}

function toProblem(
  issue: z.core.$ZodIssue,
  locate: (path: PropertyKey[]) => Pick<ConfigProblem, "line" | "column">,
): ConfigProblem {
  let path = issue.path;
  let message = issue.message;
  if (issue.code === "unrecognized_keys") {
    // Point at the unknown key itself, and say which keys are allowed nearby.
    path = [...issue.path, issue.keys[0]!];
    message = `unknown key "${issue.keys.join('", "')}"`;
  }
  if (issue.code === "invalid_key") {
    // A name zod refused as a record key ("Invalid key in record"): say what its own check said.
    const reasons = issue.issues.map((inner) => inner.message);
    message = issue.input === "" ? "a name may not be empty" : reasons.join("; ") || "not a valid name";
  } else if (issue.code === "invalid_type" && issue.input === undefined) message = "is required";
  else if (issue.code !== "unrecognized_keys") {
    // Every reason names the value found, as written.
    const reason = reasonFor(issue, fieldAt(snoozeFile, path));
    message = issue.input === undefined ? reason : `${reason}, not ${showValue(issue.input)}`;
  }
  return { key: keyPath(path), message, ...locate(path) };
}

/** A dotted key path; a name that is empty or holds a space or a dot is quoted (`models."my model"`). */
const keyPath = (path: readonly PropertyKey[]) =>
  path.map((key) => (/^[^\s."]+$/.test(String(key)) ? String(key) : JSON.stringify(String(key)))).join(".");
