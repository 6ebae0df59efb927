/**
 * Python's truth of a JSON value, as vLLM's request checks read raw bodies (`if data.get(x)`):
 * empty strings, lists and objects, 0, false and null are false; `"false"` is true.
 */
export function pythonTruthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0;
  if (value && typeof value === "object") return Object.keys(value).length > 0;
  return !!value;
}
