import { z } from "zod";
import { longestTimer as longest, maxTimerMs, parseDuration } from "../duration.ts";
import {
  durationRules,
  noHiddenCharacterRules,
  notOneOfRules,
  sizeAtLeastOneRules,
  sizeRules,
} from "./crd-rules.ts";
import { spelledOut } from "./name-fold.ts";

/**
 * Field types shared by the YAML file, annotations and the CRDs. Durations and
 * sizes stay strings in the schema's input (so the generated CRD documents the
 * written form) and become milliseconds and bytes after parsing.
 */

// Settings that arm timers stop at the longest a timer waits (`maxTimerMs`: a hold budget of
// 720h would spin).

const durationForm = /^(never|0|(\d+(\.\d+)?(ms|s|m|h))+)$/;
const finiteForm = /^(0|(\d+(\.\d+)?(ms|s|m|h))+)$/;
/** Milliseconds in a duration of the right form; `never` is Infinity. */
const msOf = (text: string) => (text === "never" ? Number.POSITIVE_INFINITY : parseDuration(text)!);
// The range checks below read the text, not the milliseconds it becomes, so a refusal names the
// value as written (`not "597h"`, not `not 2149200000`); `abort` keeps them off a malformed one.

/**
 * The longest text a duration or size may be: far more than any needs (`596h31m23.647s` is 14), and
 * a bound the API server's CEL cost estimate needs to let the CRDs' range rules run.
 */
const longestText = 64;

const tooLongDuration = `is too long: at most ${longest}, or "never"`;
/** A duration or `never`, as written, at most `maxTimerMs`. */
const durationText = z
  .string()
  .regex(durationForm, {
    message: 'expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"',
    abort: true,
  })
  // A text this long is a long duration too (`9` 400 times and `s`), or one written oddly.
  .max(longestText, { message: tooLongDuration, abort: true })
  // `never` is the one Infinity: a duration of more digits than a double holds reads as Infinity
  // too, and was taken as `never` (found by an outside tester: 400 nines and `s`).
  .refine((text) => text === "never" || msOf(text) <= maxTimerMs, { message: tooLongDuration });

/** `30s`, `5m`, `1h30m`, `0`, or `never` (Infinity: the step never happens); at most `maxTimerMs`. */
export const duration = durationText
  .meta({
    "x-kubernetes-validations": durationRules(durationForm, {
      atMostMs: maxTimerMs,
      atMostMessage: tooLongDuration,
    }),
  })
  .transform(msOf)
  .meta({ description: 'A duration such as "30s", "5m" or "1h30m"; "never" disables the step.' });

/**
 * Under a millisecond, but not 0: a timer waits whole milliseconds, so `0.4ms` would be a timeout of
 * none (found by an outside tester: `startTimeout: 0.0001ms` loaded, and every start then failed
 * "not ready within startTimeout (0ms)").
 */
const underOneMs = (text: string) => msOf(text) > 0 && msOf(text) < 1;

/**
 * A timeout that `never` turns off. 0 is refused: the timers would take it as no timeout at all,
 * which nobody reading `0` would guess; so is less than a millisecond.
 */
const noTimeoutOfZero = 'must be longer than 0; write "never" for no timeout';
export const timeout = durationText
  .refine((text) => msOf(text) > 0, { message: noTimeoutOfZero })
  .refine((text) => !underOneMs(text), { message: 'must be at least 1ms; write "never" for no timeout' })
  .meta({
    "x-kubernetes-validations": durationRules(durationForm, {
      atMostMs: maxTimerMs,
      atMostMessage: tooLongDuration,
      positive: { message: 'must be at least 1ms (0 is no timeout at all); write "never" for no timeout' },
    }),
  })
  .transform(msOf)
  .meta({ description: 'A duration such as "30s", "5m" or "1h30m"; "never" turns the timeout off.' });

/**
 * A duration that must end: a timeout or budget for which `never` cannot work (`why` says what
 * would go wrong); at most `maxTimerMs` (or `atMost`, with its reason), and at least 1 ms when `positive`.
 */
export function finiteDuration(
  why: string,
  { positive = false, atMost }: { positive?: boolean; atMost?: { ms: number; message: string } } = {},
) {
  const tooLong = `is too long: at most ${longest}`;
  return z
    .string()
    .regex(finiteForm, {
      error: (issue) =>
        issue.input === "never"
          ? `"never" cannot work here: ${why}; give a duration like "30s" or "5m"`
          : `expected a duration like ${positive ? '"250ms", "30s", "5m" or "1h30m"' : '"250ms", "30s", "5m", "1h30m" or "0"'}`,
      abort: true,
    })
    .max(longestText, { message: tooLong, abort: true })
    .refine((text) => msOf(text) <= maxTimerMs, { message: tooLong })
    .refine((text) => !atMost || msOf(text) <= atMost.ms, { message: atMost?.message })
    .refine((text) => !positive || msOf(text) > 0, { message: `must be longer than 0: ${why}` })
    .refine((text) => !positive || !underOneMs(text), { message: `must be at least 1ms: ${why}` })
    .meta({
      "x-kubernetes-validations": durationRules(finiteForm, {
        atMostMs: Math.min(maxTimerMs, atMost?.ms ?? maxTimerMs),
        atMostMessage: atMost && atMost.ms < maxTimerMs ? atMost.message : tooLong,
        ...(positive ? { positive: { message: `must be at least 1ms: ${why}` } } : {}),
      }),
    })
    .transform(msOf)
    .meta({ description: 'A duration such as "30s", "5m" or "1h30m".' });
}

// Kubernetes quantity suffixes for a count of bytes: binary (powers of 1024), decimal (powers of
// 1000, `k` lower-case as in SI; `K` is not one) and an exponent of ten (`1e9`). Kubernetes' `m`
// (milli) is left out: no size is a thousandth of a byte.
const binaryPowers: Record<string, number> = { Ki: 10, Mi: 20, Gi: 30, Ti: 40, Pi: 50, Ei: 60 };
const decimalPowers: Record<string, number> = { "": 0, k: 3, M: 6, G: 9, T: 12, P: 15, E: 18 };

// A fraction needs a unit (`1.5Gi`): a fraction of a byte (`0.5`) is no size, and an exponent
// (`1e9`) takes a whole number, so that it cannot write one either (`5e0`, not `0.5e0`). `1E` is
// exa and `1E3` a thousand, as in Kubernetes. (No lookahead: the CRD's pattern is checked by RE2.)
const sizeForm = /^(\d+(\.\d+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)|\d+([eE]\d+)?)$/;
const sizeMessage =
  'expected a size like "16Gi", "512Mi", "2G", "500k", "1e9" or a whole number of bytes (Kubernetes quantity suffixes: Ki, Mi, Gi, Ti, Pi, Ei, k, M, G, T, P, E)';
/** The largest size a number holds exactly (2^53-1 bytes, just under 8Pi): sizes are added and compared. */
const largestSize = Number.MAX_SAFE_INTEGER;

/**
 * Bytes in a size of the right form, to the nearest byte (`1.3Gi`), computed exactly (`1.1G` is
 * 1100000000, not 1100000000.0000002); Infinity past `largestSize`.
 */
const bytesOf = (text: string): number => {
  const [, whole, fraction = "", suffix = ""] = /^(\d+)(?:\.(\d+))?(.*)$/.exec(text)!;
  const digits = BigInt(whole + fraction);
  if (digits === 0n) return 0;
  let two = 0;
  let ten = -fraction.length;
  if (Object.hasOwn(binaryPowers, suffix)) two = binaryPowers[suffix]!;
  else if (Object.hasOwn(decimalPowers, suffix)) ten += decimalPowers[suffix]!;
  else ten += Number(suffix.slice(1)); // `e9`, `E3`
  // At least 1 × 10^17 is past `largestSize`: stop before `1e999999999` builds a huge power of ten.
  if (ten > 16) return Number.POSITIVE_INFINITY;
  const numerator = digits * 2n ** BigInt(two) * 10n ** BigInt(Math.max(ten, 0));
  const denominator = 10n ** BigInt(Math.max(-ten, 0));
  const bytes = (2n * numerator + denominator) / (2n * denominator);
  return bytes <= BigInt(largestSize) ? Number(bytes) : Number.POSITIVE_INFINITY;
};
const tooLargeMessage = `is too large: at most ${largestSize} bytes (2^53-1, just under 8Pi)`;
// Each check gets its own copy: zod takes the message out of the object it is given.
const tooLarge = () => ({ message: tooLargeMessage });

/** A byte size in Kubernetes quantity form: `512Mi`, `16Gi`, `2G`, `500k`, `1e9`, `1048576`. */
export const byteSize = z
  .string()
  .regex(sizeForm, { message: sizeMessage, abort: true })
  .max(longestText, { ...tooLarge(), abort: true })
  .refine((text) => bytesOf(text) <= largestSize, tooLarge())
  .meta({ "x-kubernetes-validations": sizeRules(largestSize, tooLargeMessage) })
  .transform(bytesOf)
  .meta({ description: 'A size in bytes, written like a Kubernetes quantity: "16Gi", "512Mi", "2G".' });

/** A byte size that limits something and so must be at least 1 byte (`why` says what 0 would do). */
export function byteLimit(why: string) {
  return z
    .string()
    .regex(sizeForm, { message: sizeMessage, abort: true })
    .max(longestText, { ...tooLarge(), abort: true })
    .refine((text) => bytesOf(text) <= largestSize, { ...tooLarge(), abort: true })
    .refine((text) => bytesOf(text) >= 1, { message: `must be at least 1 byte: ${why}` })
    .meta({
      "x-kubernetes-validations": [
        ...sizeRules(largestSize, tooLargeMessage),
        ...sizeAtLeastOneRules(`must be at least 1 byte: ${why}`),
      ],
    })
    .transform(bytesOf)
    .meta({ description: 'A size in bytes, written like a Kubernetes quantity: "16Gi", "512Mi", "2G".' });
}

/** Names of the invisible (format, Unicode Cf) characters most often pasted into a name by mistake. */
const hiddenNames: Record<number, string> = {
  173: "soft hyphen",
  1564: "Arabic letter mark",
  6158: "Mongolian vowel separator",
  8203: "zero width space",
  8204: "zero width non-joiner",
  8205: "zero width joiner",
  8206: "left-to-right mark",
  8207: "right-to-left mark",
  8234: "left-to-right embedding",
  8235: "right-to-left embedding",
  8236: "pop directional formatting",
  8237: "left-to-right override",
  8238: "right-to-left override",
  8288: "word joiner",
  8289: "function application",
  8290: "invisible times",
  8291: "invisible separator",
  8292: "invisible plus",
  8294: "left-to-right isolate",
  8295: "right-to-left isolate",
  8296: "first strong isolate",
  8297: "pop directional isolate",
  65279: "zero width no-break space, or byte order mark",
};

/**
 * Why `name` holds a character that does not show (a control character, Unicode Cc, a format
 * character, Cf, such as U+200B, or a lone surrogate, Cs), naming the first and its position (in characters, from 1), or
 * undefined. `qwen` and `qwen` with a zero-width space after it look like one name but are two.
 */
export function hiddenCharacterProblem(name: string): string | undefined {
  const characters = [...name];
  // A lone surrogate (Cs, only written as an escape, "\ud800") is no character at all: it shows as
  // U+FFFD, and a command line or UTF-8 carries it as that, so no engine could be told the name.
  const index = characters.findIndex((c) => /[\p{Cc}\p{Cf}\p{Cs}]/u.test(c));
  if (index < 0) return undefined;
  const code = characters[index]!.codePointAt(0)!;
  const hex = `U+${code.toString(16).toUpperCase().padStart(4, "0")}`;
  const kind = /\p{Cc}/u.test(characters[index]!)
    ? "a control character"
    : /\p{Cs}/u.test(characters[index]!)
      ? "a lone surrogate: half of a UTF-16 pair, no character"
      : (hiddenNames[code] ?? "an invisible format character");
  return `${spelledOut(name)} holds ${hex} (${kind}) at position ${index + 1}, a character that does not show: take it out (the name would look like another)`;
}

/** A name check for zod: refuses a name with a hidden character, saying which and where. */
const noHiddenCharacters = (name: string, ctx: z.RefinementCtx) => {
  const message = hiddenCharacterProblem(name);
  // The message names the value itself, spelled out so the character shows.
  // One mistake, one problem: a U+FEFF is not also "whitespace".
  if (message)
    ctx.addIssue({ code: "custom", message, input: name, params: { standalone: true }, continue: false });
};

/**
 * At most `most` characters, counted as the API server counts a CRD's `maxLength` (Unicode code
 * points), not as `z.string().max` does (UTF-16 units: an emoji is 2), which refused a name the
 * CRD had let through. The JSON Schema gets the `maxLength` (see its `meta` where used).
 */
function atMostCharacters(most: number) {
  return (text: string, ctx: z.RefinementCtx) => {
    // Code points only when the UTF-16 length says it may matter: the common name is not split.
    if (text.length > most && [...text].length > most)
      ctx.addIssue({ code: "too_big", origin: "string", maximum: most, inclusive: true, input: text });
  };
}

/** `hiddenCharacterProblem` in general words, where the character cannot be named (a CRD's rule). */
const hiddenCharacterMessage =
  "holds a character that does not show (a control character, or an invisible format character such as U+200B, zero width space): take it out (the name would look like another)";

const pathNames = [".", ".."];
const pathNameMessage =
  'may not be "." or "..": a model\'s name goes into URL paths (/v1/models/{model}), where it would mean the folder itself or the one above, and OpenAI\'s clients refuse it';

/** An OpenAI model id or alias: what clients put in the request's `model` field. */
export const modelId = z
  .string()
  // One mistake, one problem: an empty name is not also "whitespace".
  .min(1, { message: "may not be empty", abort: true })
  .superRefine(atMostCharacters(253))
  .superRefine(noHiddenCharacters)
  .regex(/^[^\s]+$/, { message: "a model id may not contain whitespace" })
  // Clients put the name in a path (`/v1/models/{model}`), where these mean this folder and the
  // one above: the openai SDK refuses them as path parameters (found by an outside tester).
  .refine((name) => !pathNames.includes(name), { message: pathNameMessage })
  .meta({
    maxLength: 253,
    "x-kubernetes-validations": [
      ...noHiddenCharacterRules(hiddenCharacterMessage),
      ...notOneOfRules(pathNames, pathNameMessage),
    ],
  });

/** The name of a slot (snooze.yaml: a key under `slots:`, any name). */
export const slotName = z.string().min(1).superRefine(noHiddenCharacters);

/**
 * On Kubernetes a slot is named as its Slot object is (a DNS-1123 subdomain: what the apiserver
 * takes as a custom resource's name), and its Lease `snooze-slot-<name>` (at most 253 characters)
 * must keep all of it. Any other name could never have a Slot, so its settings would never apply,
 * and the Lease name, lowercased and cleaned, would be shared: `GPU-0`, `gpu_0`, `gpu-0 ` and
 * `gpu-0` all had `snooze-slot-gpu-0`.
 */
export const kubeSlotNameMax = 253 - "snooze-slot-".length;
const kubeSlotForm = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const kubeNameRule = `lowercase letters, digits, "-" and ".", starting and ending with a letter or digit, at most ${kubeSlotNameMax} characters`;
const kubeSlotRule = `a slot is named as its Slot object is: ${kubeNameRule}`;
export const kubeSlotName = z
  .string()
  .min(1, {
    message: `may not be empty: name the Slot the members share (${kubeNameRule}), or leave the setting out for no slot`,
    abort: true,
  })
  .max(kubeSlotNameMax, { message: `is too long: ${kubeSlotRule}`, abort: true })
  .superRefine(noHiddenCharacters)
  .regex(kubeSlotForm, { message: kubeSlotRule });
