import { type Document, isNode, isPair, isScalar, type LineCounter, visit } from "yaml";
import { type ConfigProblem, keyPath } from "./config-error.ts";
import { pathOf, positionAt } from "./yaml-paths.ts";

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

/**
 * Every tag in the file that is not an allowed one, at the value it tags, and every `!!int` or
 * `!!float` on text that is no such number. The YAML library leaves `!!float 5` as the text "5" (its
 * float form wants a point) and `!!int 5.0` as "5.0"; both are the number 5 here, as `5.0` and `5`
 * written plainly are, so an integer setting takes them: the value counts, not how it is spelled.
 * Nodes `ignored` (the user's own, under `x-`) are not checked.
 */
export function tagProblems(
  doc: Document,
  lines: LineCounter,
  ignored: (ancestry: readonly unknown[], node: unknown) => boolean = () => false,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  visit(doc, {
    Node(_, node, ancestry) {
      if (!node.tag || ignored(ancestry, node)) return;
      let message: string | undefined;
      if (!allowedTags.has(node.tag))
        message = `the YAML tag ${shortTag(node.tag)} is not understood here: remove it and write the value plainly`;
      else if (isScalar(node) && typeof node.value === "string" && numberTags.has(node.tag)) {
        const number = yamlNumber(node.value);
        const tag = shortTag(node.tag);
        if (number === undefined)
          message = `the YAML tag ${tag} takes a number, not ${JSON.stringify(node.value)}`;
        else if (tag === "!!int" && !Number.isInteger(number))
          message = `the YAML tag !!int takes a whole number, not ${node.value}`;
        else node.value = number;
      }
      if (message === undefined) return;
      // A tag on a key is reported at the entry it names; its path ends in that key.
      // A tagged setting is reported at its key, as every problem with a setting is.
      const parent = ancestry.at(-1);
      const entry = isPair(parent) ? parent : undefined;
      const path = entry?.key === node ? pathOf(ancestry, entry.value, doc) : pathOf(ancestry, node, doc);
      const keyNode = isNode(entry?.key) ? entry.key : undefined;
      problems.push({
        key: keyPath(path),
        message,
        ...positionAt(lines, keyNode?.range?.[0] ?? node.range?.[0]),
      });
    },
  });
  return problems;
}

const numberTags = new Set(["tag:yaml.org,2002:int", "tag:yaml.org,2002:float"]);

/** The number a YAML 1.2 core-schema int or float is written as (`5`, `5.0`, `1e3`, `0x1F`, `.inf`), if any. */
function yamlNumber(text: string): number | undefined {
  if (/^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$/.test(text)) return Number(text);
  if (/^0x[0-9a-fA-F]+$/.test(text)) return Number.parseInt(text.slice(2), 16);
  if (/^0o[0-7]+$/.test(text)) return Number.parseInt(text.slice(2), 8);
  if (/^[-+]?\.(inf|Inf|INF)$/.test(text)) return text.startsWith("-") ? -Infinity : Infinity;
  if (/^\.(nan|NaN|NAN)$/.test(text)) return Number.NaN;
  return undefined;
}
