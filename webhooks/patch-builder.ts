import { type JsonPatch, pointer } from "./json-patch.ts";
import { at, isObject } from "./object-path.ts";

/**
 * JSON Patch operations that set or remove one value, creating missing parent objects on the way.
 * Setting a value that is already there yields no operation, which keeps mutations idempotent.
 */
export function setPatch(object: unknown, path: string[], value: unknown): JsonPatch {
  let node: unknown = object;
  for (let depth = 0; depth < path.length; depth++) {
    const key = path[depth]!;
    const last = depth === path.length - 1;
    if (!isObject(node)) return []; // the parent is not an object: nothing sensible to patch
    if (!Object.hasOwn(node, key) || (!last && !isObject(node[key]))) {
      // Build the rest of the path as one nested value.
      let nested: unknown = value;
      for (let i = path.length - 1; i > depth; i--) nested = { [path[i]!]: nested };
      const exists = Object.hasOwn(node, key);
      return [{ op: exists ? "replace" : "add", path: pointer(...path.slice(0, depth + 1)), value: nested }];
    }
    if (last) {
      if (JSON.stringify(node[key]) === JSON.stringify(value)) return [];
      return [{ op: "replace", path: pointer(...path), value }];
    }
    node = node[key];
  }
  return [];
}

export function removePatch(object: unknown, path: string[]): JsonPatch {
  const parent = at(object, ...path.slice(0, -1));
  if (!isObject(parent) || !Object.hasOwn(parent, path.at(-1)!)) return [];
  return [{ op: "remove", path: pointer(...path) }];
}

/**
 * Applies a patch made by these helpers to a copy of `object`, so several steps can build on each
 * other and tests can check the result. Supports add, replace and remove of object members.
 *
 * Only the objects and arrays on an operation's path are copied (each once), the rest is shared
 * with `object`, which is left as it was: a deep copy of the whole object (structuredClone) is
 * recursive, and a template holding fields nested 10,000 deep (a CRD that keeps unknown fields
 * takes them) overflowed the stack, so the webhook refused the write and said to retry.
 */
export function applyPatch<T>(object: T, patch: JsonPatch): T {
  const copies = new WeakSet<object>();
  const copied = (node: unknown): unknown => {
    if (Array.isArray(node)) {
      if (copies.has(node)) return node;
      const copy = [...node];
      copies.add(copy);
      return copy;
    }
    if (isObject(node)) {
      if (copies.has(node)) return node;
      const copy = { ...node };
      copies.add(copy);
      return copy;
    }
    return node;
  };
  const root = copied(object);
  for (const op of patch) {
    const segments = op.path
      .slice(1)
      .split("/")
      .map((s) => s.replaceAll("~1", "/").replaceAll("~0", "~"));
    let parent: unknown = root;
    for (const segment of segments.slice(0, -1)) {
      const container = parent as Record<string, unknown>;
      const child = Array.isArray(parent) || isObject(parent) ? container[segment] : undefined;
      parent = copied(child);
      if (parent !== child) container[segment] = parent;
    }
    const key = segments.at(-1)!;
    if (Array.isArray(parent)) {
      const index = key === "-" ? parent.length : Number(key);
      if (op.op === "remove") parent.splice(index, 1);
      else if (op.op === "add") parent.splice(index, 0, op.value);
      else parent[index] = op.value;
    } else if (isObject(parent)) {
      if (op.op === "remove") delete parent[key];
      else parent[key] = op.value;
    } else {
      throw new Error(`cannot apply ${op.op} at ${op.path}`);
    }
  }
  return root as T;
}
