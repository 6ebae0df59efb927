import {
  type Document,
  isAlias,
  isCollection,
  isMap,
  isScalar,
  isSeq,
  type LineCounter,
  Scalar,
  visit,
} from "yaml";
import { type ConfigProblem, keyPath } from "./config-error.ts";
import { isMergePair, keyText, pathOf, positionAt } from "./yaml-paths.ts";

/**
 * What is wrong with the keys of the file's mappings, each at the key: a key that is a list or a
 * mapping, one that is YAML null (`null:`, `~:`, or none at all), one set twice in one mapping (a
 * merge key `<<` too), and a merge key that names no mapping. Mappings `ignored` are not checked. The YAML library would turn a null key into the name ""
 * and report a repeated key without saying which, so these are checked here, where the path is known.
 */
export function keyProblems(
  doc: Document,
  lines: LineCounter,
  ignored: (ancestry: readonly unknown[], node: unknown) => boolean = () => false,
): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const at = (offset: number | undefined) => positionAt(lines, offset);
  visit(doc, {
    Map(_, map, ancestry) {
      // What the file keeps for itself under `x-` is not read, so not checked; but YAML itself
      // cannot read a merge key that names no mapping.
      const own = ignored(ancestry, map);
      const mapPath = pathOf(ancestry, map, doc);
      const firstLine = new Map<string, number>();
      let firstMerge: number | undefined;
      for (const pair of map.items) {
        const key = isAlias(pair.key) ? pair.key.resolve(doc) : pair.key;
        const where = at((pair.key as { range?: number[] } | null)?.range?.[0] ?? map.range?.[0]);
        if (own && !isMergePair(pair)) continue;
        if (isCollection(key)) {
          problems.push({
            key: keyPath(mapPath),
            message: "a key must be a plain name, not a list or a mapping",
            ...where,
          });
          continue;
        }
        if (isMergePair(pair)) {
          // The YAML library would take the first `<<` and drop the next without a word.
          if (firstMerge !== undefined && !own)
            problems.push({
              key: keyPath([...mapPath, "<<"]),
              message: `is set twice in this mapping (first on line ${firstMerge}): keep one, listing what it merges (\`<<: [*a, *b]\`)`,
              ...where,
            });
          else if (!mergesMappings(doc, pair.value))
            problems.push({
              key: keyPath([...mapPath, "<<"]),
              message:
                'a merge key takes a mapping or an alias of one (`<<: *base`), or a list of them; quote it (`"<<":`) for a key named <<',
              ...where,
            });
          firstMerge ??= where.line;
          continue;
        }
        const name = keyText(key, doc);
        if (name === undefined) {
          const written = isScalar(key) ? key.source : undefined;
          problems.push({
            key: keyPath([...mapPath, written ?? ""]),
            message: written
              ? `the key \`${written}\` is YAML null, not a name: quote it (\`"${written}":\`) to use it as a name, or give a name`
              : "the key is missing (YAML reads an empty key as null): give a name",
            ...where,
          });
          continue;
        }
        const first = firstLine.get(name);
        if (first !== undefined) {
          problems.push({
            key: keyPath([...mapPath, name]),
            message: `is set twice in this mapping (first on line ${first}): keep one`,
            ...where,
          });
          continue;
        }
        firstLine.set(name, where.line);
      }
    },
  });
  return problems;
}

/** Whether a merge key's value is what YAML merges: a mapping, an alias of one, or a list of those. */
function mergesMappings(doc: Document, value: unknown): boolean {
  const isMapping = (node: unknown) => isMap(isAlias(node) ? node.resolve(doc) : node);
  const target = isAlias(value) ? value.resolve(doc) : value;
  return isMapping(target) || (isSeq(target) && target.items.length > 0 && target.items.every(isMapping));
}

/**
 * Makes every mapping key the text it is written as (see `keyText`), so that the settings read from
 * the file name `1.50:` "1.50", not "1.5". Run after `keyProblems` found none.
 */
export function keysAsWritten(doc: Document): void {
  visit(doc, {
    Pair(_, pair) {
      if (isMergePair(pair)) return;
      const name = keyText(pair.key, doc);
      if (name === undefined) return;
      if (isScalar(pair.key)) pair.key.value = name;
      else if (isAlias(pair.key)) {
        const written = new Scalar(name);
        written.range = pair.key.range;
        pair.key = written;
      }
    },
  });
}
