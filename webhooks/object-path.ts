/** Reading Kubernetes objects that arrive as untyped JSON, without trusting their shape. */

import { isObject, type JsonObject } from "../lib/json-object.ts";

export { isObject, type JsonObject };

/** The value at `path`, or undefined when any step is missing or not an object. */
export function at(object: unknown, ...path: string[]): unknown {
  let current: unknown = object;
  for (const key of path) {
    if (!isObject(current) || !Object.hasOwn(current, key)) return undefined;
    current = current[key];
  }
  return current;
}

/** A string map such as labels or annotations; entries whose value is not a string are left out. */
export function stringMap(value: unknown): Record<string, string> {
  if (!isObject(value)) return {};
  const out: Record<string, string> = {};
  for (const [key, entry] of Object.entries(value)) if (typeof entry === "string") out[key] = entry;
  return out;
}

export const annotationsOf = (object: unknown) => stringMap(at(object, "metadata", "annotations"));
export const labelsOf = (object: unknown) => stringMap(at(object, "metadata", "labels"));

/** An integer field, or undefined when absent or not a whole number. */
export function integerAt(object: unknown, ...path: string[]): number | undefined {
  const value = at(object, ...path);
  return typeof value === "number" && Number.isInteger(value) ? value : undefined;
}

export function stringAt(object: unknown, ...path: string[]): string | undefined {
  const value = at(object, ...path);
  return typeof value === "string" ? value : undefined;
}
