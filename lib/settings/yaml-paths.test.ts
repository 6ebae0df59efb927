import { expect, test } from "vitest";
import { isMap, isScalar, isSeq, parseDocument, visit } from "yaml";
import { entryAt, pathOf } from "./yaml-paths.ts";

/** As the settings file is read (lib/settings/load.ts). */
const parse = (yaml: string) => parseDocument(yaml, { uniqueKeys: false, merge: true });

/** The key and value found along `path` (the deepest entry the file writes), as JSON. */
const found = (yaml: string | ReturnType<typeof parse>, path: PropertyKey[]) => {
  const { key, value } = entryAt(typeof yaml === "string" ? parse(yaml) : yaml, path);
  return { key: key?.toJSON() as unknown, value: isScalar(value) ? value.value : undefined };
};

test("an entry is found by its key as written, its own before a merged one, the first of a twice-written key", () => {
  const yaml = "base: &b { x: merged, y: merged }\nm:\n  <<: *b\n  1.50: own\n  x: own\n  x: again\n";
  expect(found(yaml, ["m", "x"])).toEqual({ key: "x", value: "own" });
  expect(found(yaml, ["m", "y"])).toEqual({ key: "y", value: "merged" });
  expect(found(yaml, ["m", "1.50"])).toEqual({ key: 1.5, value: "own" });
  // `1.5` is not written: the deepest entry that is, `m`, is found.
  expect(found(yaml, ["m", "1.5"]).key).toBe("m");
});

test("a mapping changed after a lookup is looked up as it is now", () => {
  const doc = parse("m: { a: 1 }\n");
  expect(found(doc, ["m", "b"]).key).toBe("m");
  const m = doc.get("m", true);
  if (!isMap(m)) throw new Error("not a mapping");
  m.items.push(doc.createPair("b", 2));
  expect(found(doc, ["m", "b"])).toEqual({ key: "b", value: 2 });
});

test("every entry of a mapping of 50,000 is found without reading all its keys for each", () => {
  // Found by an outside tester: each problem's line read every key of its mapping, so a file of
  // 20,000 models with a mistake in each took 18 s to be refused (here the test's time ran out).
  const count = 50_000;
  const doc = parse(`models:\n${Array.from({ length: count }, (_, i) => `  m${i}: ${i}\n`).join("")}`);
  let right = 0;
  for (let i = 0; i < count; i++) if (found(doc, ["models", `m${i}`]).value === i) right++;
  expect(right).toBe(count);
});

test("the path of every item of a list of 300,000 is found without searching the list for each", () => {
  // Found by an outside tester: each mapping, alias and tag in a list was placed by `indexOf`, so a
  // file of 300,000 empty mappings in a list (under 1 MiB) took 29 s to load.
  const count = 300_000;
  const doc = parse(`x: [${Array.from({ length: count }, () => "{}").join(",")}]\n`);
  let right = 0;
  visit(doc, {
    Map(key, node, ancestry) {
      if (typeof key === "number" && pathOf(ancestry, node, doc).join(".") === `x.${key}`) right++;
    },
  });
  expect(right).toBe(count);
  // A list changed after a lookup is looked up as it is now.
  const list = doc.get("x", true);
  if (!isSeq(list)) throw new Error("not a list");
  const first = list.items.shift();
  list.items.push(first);
  visit(doc, {
    Map(key, node, ancestry) {
      if (key === count - 1) expect(pathOf(ancestry, node, doc)).toEqual(["x", count - 1]);
    },
  });
});
