import { type Document, isNode, isPair, type LineCounter, visit } from "yaml";
import { type ConfigProblem, keyPath } from "./config-error.ts";
import { pathOf } from "./yaml-paths.ts";

/**
 * The YAML tags a settings file may use: the JSON-like ones of the core schema (`!!str 8080` is a
 * way to quote) and `!`, which only says "plain text". The YAML library resolves `!!binary` and
 * `!!timestamp` to values no setting takes, and keeps an unknown tag such as `!duration` as plain
 * text with only a warning, so `sleepAfter: !duration 30s` would look understood when it is not.
 */
const allowedTags = new Set([
  "!",
  ...["str", "int", "float", "bool", "null", "map", "seq"].map((t) => `tag:yaml.org,2002:${t}`),
]);

/** A tag as it is usually written: `!!binary` for the YAML type, else as given (`!duration`). */
const shortTag = (tag: string) => tag.replace(/^tag:yaml\.org,2002:/, "!!");

/** Every tag in the file that is not an allowed one, at the value it tags. */
export function tagProblems(doc: Document, lines: LineCounter): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  visit(doc, {
    Node(_, node, ancestry) {
      if (!node.tag || allowedTags.has(node.tag)) return;
      // A tag on a key is reported at the entry it names; its path ends in that key.
      // A tagged setting is reported at its key, as every problem with a setting is.
      const parent = ancestry.at(-1);
      const entry = isPair(parent) ? parent : undefined;
      const path = entry?.key === node ? pathOf(ancestry, entry.value, doc) : pathOf(ancestry, node, doc);
      const keyNode = isNode(entry?.key) ? entry.key : undefined;
      const pos = lines.linePos(keyNode?.range?.[0] ?? node.range?.[0] ?? 0);
      problems.push({
        key: keyPath(path),
        message: `the YAML tag ${shortTag(node.tag)} is not understood here: remove it and write the value plainly`,
        line: pos.line,
        column: pos.col,
      });
    },
  });
  return problems;
}
