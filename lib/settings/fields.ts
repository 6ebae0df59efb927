import { z } from "zod";
import { parseDuration } from "../duration.ts";

/**
 * Field types shared by the YAML file, annotations and the CRDs. Durations and
 * sizes stay strings in the schema's input (so the generated CRD documents the
 * written form) and become milliseconds and bytes after parsing.
 */

/**
 * The longest delay a Node.js timer can wait: 2^31-1 ms (about 24.8 days). A longer one fires
 * after 1 ms instead (a hold budget of 720h would spin), so settings that arm timers stop there.
 */
export const maxTimerMs = 2 ** 31 - 1;
const longest = "596h (about 24.8 days: a timer waits at most 2^31-1 ms)";
const durationForm = /^(never|0|(\d+(\.\d+)?(ms|s|m|h))+)$/;
const finiteForm = /^(0|(\d+(\.\d+)?(ms|s|m|h))+)$/;
/** Milliseconds in a duration of the right form; `never` is Infinity. */
const msOf = (text: string) => (text === "never" ? Number.POSITIVE_INFINITY : parseDuration(text)!);
// The range checks below read the text, not the milliseconds it becomes, so a refusal names the
// value as written (`not "597h"`, not `not 2149200000`); `abort` keeps them off a malformed one.

/** A duration or `never`, as written, at most `maxTimerMs`. */
const durationText = z
  .string()
  .regex(durationForm, {
    message: 'expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"',
    abort: true,
  })
  .refine((text) => msOf(text) === Number.POSITIVE_INFINITY || msOf(text) <= maxTimerMs, {
    message: `is too long: at most ${longest}, or "never"`,
  });

/** `30s`, `5m`, `1h30m`, `0`, or `never` (Infinity: the step never happens); at most `maxTimerMs`. */
export const duration = durationText
  .transform(msOf)
  .meta({ description: 'A duration such as "30s", "5m" or "1h30m"; "never" disables the step.' });

/**
 * A timeout that `never` turns off. 0 is refused: the timers would take it as no timeout at all,
 * which nobody reading `0` would guess.
 */
export const timeout = durationText
  .refine((text) => msOf(text) > 0, { message: 'must be longer than 0; write "never" for no timeout' })
  .transform(msOf)
  .meta({ description: 'A duration such as "30s", "5m" or "1h30m"; "never" turns the timeout off.' });

/**
 * A duration that must end: a timeout or budget for which `never` cannot work (`why` says what
 * would go wrong); at most `maxTimerMs` (or `atMost`, with its reason), and above 0 when `positive`.
 */
export function finiteDuration(
  why: string,
  { positive = false, atMost }: { positive?: boolean; atMost?: { ms: number; message: string } } = {},
) {
  return z
    .string()
    .regex(finiteForm, {
      error: (issue) =>
        issue.input === "never"
          ? `"never" cannot work here: ${why}; give a duration like "30s" or "5m"`
          : `expected a duration like ${positive ? '"250ms", "30s", "5m" or "1h30m"' : '"250ms", "30s", "5m", "1h30m" or "0"'}`,
      abort: true,
    })
    .refine((text) => msOf(text) <= maxTimerMs, { message: `is too long: at most ${longest}` })
    .refine((text) => !atMost || msOf(text) <= atMost.ms, { message: atMost?.message })
    .refine((text) => !positive || msOf(text) > 0, { message: `must be longer than 0: ${why}` })
    .transform(msOf)
    .meta({ description: 'A duration such as "30s", "5m" or "1h30m".' });
}

const sizeUnits: Record<string, number> = {
  "": 1,
  K: 1e3,
  M: 1e6,
  G: 1e9,
  T: 1e12,
  Ki: 2 ** 10,
  Mi: 2 ** 20,
  Gi: 2 ** 30,
  Ti: 2 ** 40,
};

// A fraction needs a unit (`1.5Gi`): a fraction of a byte (`0.5`) is no size.
// (No lookahead: the CRD's pattern is checked by RE2, which has none.)
const sizeForm = /^(\d+(Ki|Mi|Gi|Ti|K|M|G|T)?|\d+\.\d+(Ki|Mi|Gi|Ti|K|M|G|T))$/;
const sizeMessage = 'expected a size like "16Gi", "512Mi", "2G" or a whole number of bytes';
/** Bytes in a size of the right form. */
const bytesOf = (text: string) => {
  const [, amount, unit] = /^(\d+(?:\.\d+)?)(\w*)$/.exec(text)!;
  return Math.round(Number(amount) * sizeUnits[unit ?? ""]!);
};

/** A byte size in Kubernetes quantity form: `512Mi`, `16Gi`, `2G`, `1048576`. */
export const byteSize = z
  .string()
  .regex(sizeForm, { message: sizeMessage })
  .transform(bytesOf)
  .meta({ description: 'A size in bytes, written like a Kubernetes quantity: "16Gi", "512Mi", "2G".' });

/** A byte size that limits something and so must be at least 1 byte (`why` says what 0 would do). */
export function byteLimit(why: string) {
  return z
    .string()
    .regex(sizeForm, { message: sizeMessage, abort: true })
    .refine((text) => bytesOf(text) >= 1, { message: `must be at least 1 byte: ${why}` })
    .transform(bytesOf)
    .meta({ description: 'A size in bytes, written like a Kubernetes quantity: "16Gi", "512Mi", "2G".' });
}

/** An OpenAI model id or alias: what clients put in the request's `model` field. */
export const modelId = z
  .string()
  // One mistake, one problem: an empty name is not also "whitespace".
  .min(1, { message: "may not be empty", abort: true })
  .max(253)
  .regex(/^[^\s]+$/, { message: "a model id may not contain whitespace" });
