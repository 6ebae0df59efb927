import {
  type Document,
  isAlias,
  isMap,
  isPair,
  isScalar,
  isSeq,
  type LineCounter,
  type Node,
  type Pair,
  visit,
  type YAMLMap,
} from "yaml";

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
    if (isPair(parent)) path.push(isMergePair(parent) ? "<<" : (keyText(parent.key, doc) ?? ""));
    else if (isSeq(parent)) path.push(indexIn(parent.items, child));
  }
  return path;
}

/** Each list's items by their place in it, found once for the whole list (see `indexIn`). */
const places = new WeakMap<readonly unknown[], Map<unknown, number>>();

/**
 * The place of `item` in `items` (as `indexOf`, -1 when it is not there). Asked for every item of a
 * list, `indexOf` searched the list for each (found by an outside tester: 300,000 empty mappings in
 * a list, a file under 1 MiB, took 29 s to load); the places are found once, and again only when
 * the list changed since.
 */
function indexIn(items: readonly unknown[], item: unknown): number {
  const known = places.get(items)?.get(item);
  if (known !== undefined && items[known] === item) return known;
  const found = new Map<unknown, number>();
  for (const [index, each] of items.entries()) if (!found.has(each)) found.set(each, index);
  places.set(items, found);
  return found.get(item) ?? -1;
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
  const own = ownPair(doc, collection, String(step));
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

/**
 * Each mapping's own entries (merge keys aside) by their key's text, the first where one is written
 * twice: every problem and every number taken as written looks up its path, and reading all of a
 * mapping's keys for each made a file of 10,000 models with a mistake in each take 6 s, 20,000 take
 * 18 s (found by an outside tester). Made again when the mapping gains or loses entries (a parsed
 * settings file is not edited; a test edits one).
 */
const ownEntries = new WeakMap<YAMLMap, { size: number; byKey: Map<string, Pair> }>();

function ownPair(doc: Document, map: YAMLMap, key: string): Pair | undefined {
  let index = ownEntries.get(map);
  if (index?.size !== map.items.length) {
    const byKey = new Map<string, Pair>();
    for (const pair of map.items) {
      if (isMergePair(pair)) continue;
      const text = keyText(pair.key, doc);
      if (text !== undefined && !byKey.has(text)) byKey.set(text, pair);
    }
    index = { size: map.items.length, byKey };
    ownEntries.set(map, index);
  }
  return index.byKey.get(key);
}

/**
 * The keys of the mapping at `path`, in the order the file writes them (its own, then those its
 * merge keys copy in), so that ids such as `10` keep their place: a JavaScript object would move
 * integer-like keys to the front.
 */
export function keysInOrder(doc: Document, path: readonly PropertyKey[]): string[] {
  const keys = new Set<string>();
  const seen = new Set<unknown>();
  const collect = (node: unknown) => {
    const map = isAlias(node) ? node.resolve(doc) : node;
    if (!isMap(map) || seen.has(map)) return;
    seen.add(map);
    for (const pair of map.items) {
      if (isMergePair(pair)) continue;
      const name = keyText(pair.key, doc);
      if (name !== undefined) keys.add(name);
    }
    for (const pair of map.items.filter(isMergePair))
      for (const source of isSeq(pair.value) ? pair.value.items : [pair.value]) collect(source);
  };
  collect(entryAt(doc, path).value);
  return [...keys];
}

/** Top-level keys of the user's own, ignored: a place for anchors that models share (`x-vllm: &vllm`). */
export const ownKeyPrefix = "x-";

/**
 * Whether a node (given with the ancestors `visit` passes along) is ignored: inside a top-level
 * `x-` key and not inside an anchored node that an alias elsewhere uses (what an alias copies is
 * checked where it is written; the rest is the user's own and not read).
 */
export function ignoredOwnContent(doc: Document): (ancestry: readonly unknown[], node: unknown) => boolean {
  const top = doc.contents;
  if (!isMap(top)) return () => false;
  const ownPairs = new Set<unknown>(
    top.items.filter((pair) => !isMergePair(pair) && keyText(pair.key, doc)?.startsWith(ownKeyPrefix)),
  );
  if (ownPairs.size === 0) return () => false;
  const used = new Set<unknown>();
  const ignored = (ancestry: readonly unknown[], node: unknown) => {
    const chain = [...ancestry, node];
    const own = chain.findIndex((n) => ownPairs.has(n));
    return own >= 0 && !chain.slice(own).some((n) => used.has(n));
  };
  // An alias the settings read makes what it names read too, and so the aliases in that.
  const aliases: { alias: Node; chain: readonly unknown[] }[] = [];
  visit(doc, {
    Alias(_, alias, ancestry) {
      aliases.push({ alias, chain: [...ancestry] });
    },
  });
  for (let grew = true; grew; ) {
    grew = false;
    for (const { alias, chain } of aliases) {
      if (!isAlias(alias) || ignored(chain, alias)) continue;
      const target = alias.resolve(doc);
      if (target && !used.has(target)) {
        used.add(target);
        grew = true;
      }
    }
  }
  return ignored;
}

/** Where `offset` is in the file, as a problem names it (line and column from 1). */
export function positionAt(lines: LineCounter, offset = 0): { line: number; column: number } {
  const pos = lines.linePos(offset);
  return { line: pos.line, column: pos.col };
}
