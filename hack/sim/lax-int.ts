/**
 * An integer field as vLLM's pydantic request models read it in lax mode: an integer, a float
 * without a fractional part, a string of digits (`"max_tokens": "100"` is 100), or a boolean.
 * Anything else is one of pydantic's three errors, which vLLM returns as its 400.
 */
export type LaxInt =
  | { ok: true; value: number }
  | { ok: false; type: "int_type" | "int_parsing" | "int_from_float"; msg: string };

export function laxInt(value: unknown): LaxInt {
  if (typeof value === "number") {
    if (Number.isInteger(value)) return { ok: true, value };
    if (Number.isFinite(value))
      return {
        ok: false,
        type: "int_from_float",
        msg: "Input should be a valid integer, got a number with a fractional part",
      };
    return { ok: false, type: "int_parsing", msg: "Input should be a finite number" };
  }
  if (typeof value === "boolean") return { ok: true, value: value ? 1 : 0 };
  if (typeof value === "string") {
    if (/^\s*[+-]?\d+\s*$/.test(value)) return { ok: true, value: Number.parseInt(value, 10) };
    return {
      ok: false,
      type: "int_parsing",
      msg: "Input should be a valid integer, unable to parse string as an integer",
    };
  }
  return { ok: false, type: "int_type", msg: "Input should be a valid integer" };
}
