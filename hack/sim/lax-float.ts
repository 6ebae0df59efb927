/**
 * A float field (`temperature`, `top_p`, ...) as vLLM's pydantic request models read it in lax
 * mode: a number, a boolean, or a string that spells a number (Python's `float()` spellings,
 * `inf` and `nan` included: pydantic lets them through and vLLM's own checks refuse them).
 */
export type LaxFloat =
  | { ok: true; value: number }
  | { ok: false; type: "float_type" | "float_parsing"; msg: string };

const numeral = /^[+-]?(\d+(_\d+)*\.?(\d+(_\d+)*)?|\.\d+(_\d+)*)(e[+-]?\d+)?$/i;
const special = /^[+-]?(inf|infinity|nan)$/i;

export function laxFloat(value: unknown): LaxFloat {
  if (typeof value === "number") return { ok: true, value };
  if (typeof value === "boolean") return { ok: true, value: value ? 1 : 0 };
  if (typeof value === "string") {
    const text = value.trim();
    if (numeral.test(text)) return { ok: true, value: Number(text.replaceAll("_", "")) };
    if (special.test(text)) {
      const negative = text.startsWith("-");
      if (/nan/i.test(text)) return { ok: true, value: Number.NaN };
      return { ok: true, value: negative ? Number.NEGATIVE_INFINITY : Number.POSITIVE_INFINITY };
    }
    return {
      ok: false,
      type: "float_parsing",
      msg: "Input should be a valid number, unable to parse string as a number",
    };
  }
  return { ok: false, type: "float_type", msg: "Input should be a valid number" };
}

/** A float as Python's `repr` writes it (`-1.0`, `1e-07`, `1e+20`, `inf`): how vLLM's messages show one. */
export function pythonFloat(value: number): string {
  if (Number.isNaN(value)) return "nan";
  if (!Number.isFinite(value)) return value > 0 ? "inf" : "-inf";
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude < 1e-4 || magnitude >= 1e16)) {
    const [mantissa, exponent] = value.toExponential().split("e") as [string, string];
    const sign = exponent.startsWith("-") ? "-" : "+";
    return `${mantissa}e${sign}${exponent.replace(/^[+-]/, "").padStart(2, "0")}`;
  }
  const text = String(value);
  return Number.isInteger(value) ? `${Object.is(value, -0) ? "-0" : text}.0` : text;
}
