import { type Document, isAlias, isMap, isPair, isScalar, isSeq, type Node, type Pair } from "yaml";

/**
 * The name a mapping key stands for, as written: `1.50:` is the name "1.50" and `true:` is "true",
 * as a YAML number or boolean in a value is taken as written where a setting is text. A key that is
 * an alias stands for the text of the scalar it names.
 */
export function keyText(key: unknown, doc?: Document): string | undefined {
  const node = isAlias(key) && doc ? key.resolve(doc) : key;
  if (!isScalar(node) || node.value === null || typeof node.value === "symbol") return undefined;
  if (typeof node.value === "string") return node.value;
  return node.source ?? String(node.value);
}

/** Whether `pair` is a YAML merge key (`<<: *base`), which copies the keys of another mapping. */
export const isMergePair = (pair: Pair): boolean => isScalar(pair.key) && typeof pair.key.value === "symbol";

/** The key path to `node`, from the ancestors `visit` passes along (`["models", "qwen", "command", 2]`). */
export function pathOf(ancestry: readonly unknown[], node: unknown, doc?: Document): (string | number)[] {
  const chain = [...ancestry, node];
  const path: (string | number)[] = [];
  for (const [index, parent] of chain.entries()) {
    const child = chain[index + 1];
    if (child === undefined) break;
    if (isPair(parent)) path.push(keyText(parent.key, doc) ?? "");
    else if (isSeq(parent)) path.push(parent.items.indexOf(child as never));
  }
  return path;
}

/**
 * The deepest entry along `path` that the file writes: its key node (for a mapping entry) and its
 * value. A key copied in by a merge key (`<<: *base`) is found where the anchor writes it, so a
 * problem with it points at the line to change; a mapping's own keys win over merged ones, and an
 * earlier merge source over a later one, as when the file is read.
 */
export function entryAt(doc: Document, path: readonly PropertyKey[]): { key?: Node; value?: Node } {
  let found: { key?: Node; value?: Node } = { value: doc.contents ?? undefined };
  for (const step of path) {
    const next = childOf(doc, found.value, step, 0);
    if (!next) break;
    found = next;
  }
  return found;
}

function childOf(
  doc: Document,
  parent: unknown,
  step: PropertyKey,
  merges: number,
): { key?: Node; value?: Node } | undefined {
  // Merge sources can name each other; the alias count bounds a real file, this bounds a cycle.
  if (merges > 100) return undefined;
  const collection = isAlias(parent) ? parent.resolve(doc) : parent;
  if (isSeq(collection))
    return typeof step === "number" ? { value: collection.items[step] as Node | undefined } : undefined;
  if (!isMap(collection)) return undefined;
  const own = collection.items.find((pair) => !isMergePair(pair) && keyText(pair.key, doc) === String(step));
  if (own) return { key: own.key as Node, value: own.value as Node };
  for (const pair of collection.items.filter(isMergePair)) {
    const sources = isSeq(pair.value) ? pair.value.items : [pair.value];
    for (const source of sources) {
      const merged = childOf(doc, source, step, merges + 1);
      if (merged) return merged;
    }
  }
  return undefined;
}
