/**
 * Integers as `vllm serve`'s argparse reads them, so that a number vLLM takes on its command line
 * the simulator takes too, and one it refuses is refused here.
 */

/**
 * Python's `int()` of a string: decimal digits, optionally grouped by single underscores (`32_768`),
 * a sign and spaces around them; not hex, an exponent or a fraction (`0x10`, `1e3`, `2.0`).
 * Undefined where `int()` raises, and past 2^53, where a number would no longer be held exactly.
 */
export function pythonInt(text: string): number | undefined {
  const trimmed = text.trim();
  if (!/^[+-]?\d+(?:_\d+)*$/.test(trimmed)) return undefined;
  const value = Number(trimmed.replaceAll("_", ""));
  return Number.isSafeInteger(value) ? value : undefined;
}

/** Suffixes of `human_readable_int`: lower case decimal (`25.6k`), upper case binary (`16K`). */
const decimalSuffixes: Record<string, number> = { k: 1e3, m: 1e6, g: 1e9, t: 1e12 };
const binarySuffixes: Record<string, number> = { K: 2 ** 10, M: 2 ** 20, G: 2 ** 30, T: 2 ** 40 };

/**
 * vLLM's `human_readable_int_or_auto` (vllm/utils/argparse_utils.py), the type of
 * `--max-model-len`: `-1` or `auto` (any case) is `"auto"`; a number with a decimal suffix is
 * multiplied and cut to a whole number (`25.6k` = 25600), one with a binary suffix must be whole
 * (`16K` = 16384; `1.5K` is refused, `problem` saying so); anything else is read by `int()`.
 * Undefined where vLLM's argparse would say the value is invalid.
 */
export function humanReadableIntOrAuto(text: string): number | "auto" | { problem: string } | undefined {
  const trimmed = text.trim();
  if (trimmed === "-1" || trimmed.toLowerCase() === "auto") return "auto";
  const match = /^(\d+(?:\.\d+)?)([kKmMgGtT])$/.exec(trimmed);
  if (!match) return pythonInt(trimmed);
  const [, number, suffix] = match as unknown as [string, string, string];
  const decimal = decimalSuffixes[suffix];
  if (decimal !== undefined) return Math.trunc(Number(number) * decimal);
  if (number.includes("."))
    return {
      problem: `decimals are not allowed with binary suffixes like ${suffix}; did you mean ${number}${suffix.toLowerCase()}?`,
    };
  return Number(number) * binarySuffixes[suffix]!;
}
