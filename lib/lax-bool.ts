/** What pydantic reads as true or false in lax mode, besides JSON's own booleans. */
const words = new Map<string, boolean>([
  ["1", true],
  ["t", true],
  ["true", true],
  ["y", true],
  ["yes", true],
  ["on", true],
  ["0", false],
  ["f", false],
  ["false", false],
  ["n", false],
  ["no", false],
  ["off", false],
]);

/**
 * A boolean field of a request as vLLM reads it: its request models are pydantic's, which in lax
 * mode take `true` and `false`, the numbers 1 and 0, and the strings above in any case, so
 * `"stream": "true"` streams there. Undefined for anything else, which vLLM refuses with 400.
 */
export function laxBool(value: unknown): boolean | undefined {
  if (typeof value === "boolean") return value;
  if (value === 1 || value === 0) return value === 1;
  return typeof value === "string" ? words.get(value.toLowerCase()) : undefined;
}
