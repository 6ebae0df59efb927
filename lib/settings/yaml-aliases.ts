import {
  type Alias,
  type Document,
  isAlias,
  isMap,
  isPair,
  isSeq,
  type LineCounter,
  type Node,
  visit,
} from "yaml";
import { type ConfigProblem, keyPath } from "./config-error.ts";
import { isMergePair, pathOf, positionAt } from "./yaml-paths.ts";

/** Alias expansions a file may make in all (YAML's guard against "billion laughs" alias bombs). */
export const maxAliasCount = 100;

/**
 * What is wrong with the aliases (`*name`) of the file, each at the alias, with the key path where
 * it is written: one that names no anchor written before it, one inside the very node it names
 * (a mapping that merges itself would copy itself without end), and the one at which the aliases
 * have expanded more than `maxAliasCount` times in all. The YAML library would report these at the
 * file's start, or not at all.
 */
export function aliasProblems(doc: Document, lines: LineCounter): ConfigProblem[] {
  const at = (alias: Alias) => positionAt(lines, alias.range?.[0]);
  // An alias names the last node with its anchor written before it (as the YAML library resolves it).
  const target = new Map<Alias, Node | undefined>();
  const paths = new Map<Alias, string>();
  const latest = new Map<string, Node>();
  const problems: ConfigProblem[] = [];
  visit(doc, {
    Node(_, node, ancestry) {
      if (!isAlias(node)) {
        if (node.anchor) latest.set(node.anchor, node);
        return;
      }
      const named = latest.get(node.source);
      target.set(node, named);
      // An alias used as a key is reported at the entry it names.
      const parent = ancestry.at(-1);
      const path =
        isPair(parent) && parent.key === node
          ? pathOf(ancestry, parent.value, doc)
          : pathOf(ancestry, node, doc);
      const key = keyPath(path);
      paths.set(node, key);
      if (named === undefined) {
        problems.push({
          key,
          message: `the alias *${node.source} names no anchor (&${node.source}) before it`,
          ...at(node),
        });
        return;
      }
      if (!ancestry.includes(named as never)) return;
      // Inside what it names: `a: &self {<<: *self}` or `a: &a [*a]`.
      const merge = ancestry.findLast((n) => isPair(n));
      const mergedInto = ancestry.findLast((n) => isMap(n));
      const merging =
        isPair(merge) &&
        isMergePair(merge) &&
        mergedInto === named &&
        (merge.value === node || (isSeq(merge.value) && merge.value.items.includes(node)));
      problems.push({
        key,
        message: merging
          ? `a mapping cannot merge itself: *${node.source} names the mapping this \`<<\` is in`
          : `the alias *${node.source} is inside the anchor &${node.source} it names, so it would copy itself without end`,
        ...at(node),
      });
    },
  });
  if (problems.length > 0) return problems;
  const weights = new Map<Node, number>();
  /** Expansions one copy of `node` makes (an alias expands once, plus once for every alias inside what it names). */
  const weightOf = (node: Node | undefined): number => {
    if (node === undefined) return 0;
    const known = weights.get(node);
    if (known !== undefined) return known;
    weights.set(node, Number.POSITIVE_INFINITY); // a cycle was refused above; this only guards it
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
    if (total > maxAliasCount)
      return [
        {
          key: paths.get(alias) ?? "",
          message: `the aliases (*name) expand to too much: at most ${maxAliasCount} expansions in all (an alias bomb?)`,
          ...at(alias),
        },
      ];
  }
  return [];
}
