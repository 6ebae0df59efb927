import { z } from "zod";
import { parseDuration } from "../duration.ts";

/**
 * Field types shared by the YAML file, annotations and the CRDs. Durations and
 * sizes stay strings in the schema's input (so the generated CRD documents the
 * written form) and become milliseconds and bytes after parsing.
 */

/** `30s`, `5m`, `1h30m`, `0`, or `never` (Infinity: the step never happens). */
export const duration = z
  .string()
  .regex(/^(never|0|(\d+(\.\d+)?(ms|s|m|h))+)$/, {
    message: 'expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"',
  })
  .transform((text) => (text === "never" ? Number.POSITIVE_INFINITY : parseDuration(text)!))
  .meta({ description: 'A duration such as "30s", "5m" or "1h30m"; "never" disables the step.' });

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

/** A byte size in Kubernetes quantity form: `512Mi`, `16Gi`, `2G`, `1048576`. */
export const byteSize = z
  .string()
  .regex(/^\d+(\.\d+)?(Ki|Mi|Gi|Ti|K|M|G|T)?$/, { message: 'expected a size like "16Gi", "512Mi" or "2G"' })
  .transform((text) => {
    const [, amount, unit] = /^(\d+(?:\.\d+)?)(\w*)$/.exec(text)!;
    return Math.round(Number(amount) * sizeUnits[unit ?? ""]!);
  })
  .meta({ description: 'A size in bytes, written like a Kubernetes quantity: "16Gi", "512Mi", "2G".' });

/** An OpenAI model id or alias: what clients put in the request's `model` field. */
export const modelId = z
  .string()
  .min(1)
  .max(253)
  .regex(/^[^\s]+$/, { message: "a model id may not contain whitespace" });
