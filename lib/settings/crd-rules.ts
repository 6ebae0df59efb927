/**
 * The checks of fields.ts that a JSON Schema pattern cannot say (a duration's range, a size's, a
 * name's hidden characters), as CEL rules (`x-kubernetes-validations`) for the generated CRDs, so
 * the API server refuses such a Model or Slot itself, naming the field, whether or not a webhook
 * runs (before, it stored it, and the autoscaler could only ignore it: `InvalidSpec`). Built from
 * the same numbers and words as the zod checks beside which they sit, never written twice.
 * Kubernetes' CEL libraries used: regex (`matches`, `findAll`), lists (`sum`), quantity.
 */

export interface CrdRule {
  rule: string;
  message: string;
}

/** A string in CEL, single-quoted (a regex's backslashes doubled). */
const celString = (text: string) => `'${text.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
/** A number as a CEL double (`2147483647.0`). */
const celDouble = (n: number) => (Number.isInteger(n) ? `${n}.0` : String(n));

/** Milliseconds per unit, as fields.ts's `parseDuration` counts them. */
const unitMs: [string, number][] = [
  ["ms", 1],
  ["s", 1_000],
  ["m", 60_000],
  ["h", 3_600_000],
];

/**
 * The milliseconds of a duration of the right form, in CEL: each `<number><unit>` part as a double
 * times its unit, summed left to right as `parseDuration` does, so the two agree to the bit.
 */
const durationMs = (): string => {
  const part = "t.endsWith('ms') ? double(t.substring(0, t.size() - 2))";
  const rest = unitMs
    .slice(1)
    .map(([unit, ms]) => `t.endsWith('${unit}') ? double(t.substring(0, t.size() - 1)) * ${celDouble(ms)}`)
    .join(" : ");
  return `self.findAll('[0-9]+(\\\\.[0-9]+)?(ms|s|m|h)').map(t, ${part} : ${rest} : 0.0).sum()`;
};

/**
 * The range of a duration field: at most `atMostMs`, and at least 1 ms when `positive` (`0` and
 * less than a millisecond refused). `never` passes (the pattern says whether it may be written);
 * a text of the wrong form is the pattern's to refuse, not these rules'.
 */
export function durationRules(
  form: RegExp,
  checks: { atMostMs: number; atMostMessage: string; positive?: { message: string } },
): CrdRule[] {
  // Only a well-formed text with at least one part is counted (`0` and `never` have none).
  const counted = (test: string) =>
    `self == 'never' || self == '0' || !self.matches(${celString(form.source)}) || ${test}`;
  const rules: CrdRule[] = [
    { rule: counted(`${durationMs()} <= ${celDouble(checks.atMostMs)}`), message: checks.atMostMessage },
  ];
  if (checks.positive)
    rules.push({
      rule: `self == 'never' || (self != '0' && (!self.matches(${celString(form.source)}) || ${durationMs()} >= 1.0))`,
      message: checks.positive.message,
    });
  return rules;
}

/**
 * A byte size at most `largest` bytes (a Kubernetes quantity, which the size form is a part of).
 * Rounded to the byte as fields.ts does: up to half a byte more passes.
 */
export function sizeRules(largest: number, message: string): CrdRule[] {
  return [
    {
      rule: `!isQuantity(self) || quantity(self).compareTo(quantity('${largest}')) <= 0`,
      message,
    },
  ];
}

/** A size that must be at least 1 byte (after rounding to the byte: half a byte is 1). */
export function sizeAtLeastOneRules(message: string): CrdRule[] {
  return [{ rule: "!isQuantity(self) || quantity(self).compareTo(quantity('500m')) >= 0", message }];
}

/**
 * A name with no control (Cc) or invisible format (Cf) character: the one check of fields.ts's
 * `hiddenCharacterProblem` the API server can make (a lone surrogate cannot reach it: JSON's
 * decoder makes it U+FFFD).
 */
export function noHiddenCharacterRules(message: string): CrdRule[] {
  return [{ rule: "!self.matches('[\\\\p{Cc}\\\\p{Cf}]')", message }];
}

/** The names `forbidden` refused, with the zod check's words. */
export function notOneOfRules(forbidden: readonly string[], message: string): CrdRule[] {
  return [{ rule: forbidden.map((name) => `self != ${celString(name)}`).join(" && "), message }];
}
