/**
 * An integer field as vLLM's pydantic request models read it in lax mode: an integer, a float
 * without a fractional part, a string of digits (`"max_tokens": "100"` is 100), or a boolean.
 * Anything else is one of pydantic's errors, which vLLM returns as its 400.
 *
 * Python's JSON reader makes a number written with a fraction or an exponent (`1e308`, `3.0`) a
 * float and any other an int of any size; pydantic takes a float only when it is whole and within
 * 64 bits (`int_parsing_size` past that), an int whatever its size. `writtenAsFloat` says which
 * the body held (request-fields.ts reads it from the JSON text).
 */
export type LaxInt =
  | { ok: true; value: number }
  | {
      ok: false;
      type: "int_type" | "int_parsing" | "int_from_float" | "int_parsing_size" | "finite_number";
      msg: string;
    };

/** 2^63: pydantic's bounds for a float taken as an integer, both excluded (`i64::MAX as f64`). */
const int64Bound = 2 ** 63;

export function laxInt(value: unknown, writtenAsFloat = false): LaxInt {
  if (typeof value === "number") {
    if (!Number.isFinite(value))
      return { ok: false, type: "finite_number", msg: "Input should be a finite number" };
    if (!Number.isInteger(value))
      return {
        ok: false,
        type: "int_from_float",
        msg: "Input should be a valid integer, got a number with a fractional part",
      };
    if (writtenAsFloat && !(-int64Bound < value && value < int64Bound))
      return {
        ok: false,
        type: "int_parsing_size",
        msg: "Unable to parse input string as an integer, exceeded maximum size",
      };
    return { ok: true, value };
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
