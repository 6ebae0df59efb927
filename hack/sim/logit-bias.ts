/**
 * `logit_bias` as vLLM reads it: the schema wants a dict of numbers (`dict[str, float]`), then
 * each key must be a token id Python's `int()` reads (`" 12 "`, `"1_0"`; not `"1.5"`), and each id
 * must be in the vocabulary. The simulator biases nothing; it refuses what vLLM refuses.
 */
import { laxFloat } from "./lax-float.ts";
import { simVocabSize } from "./logprobs.ts";
import type { SchemaIssue } from "./vllm-error.ts";
import { invalidParameter, pythonRepr } from "./vllm-error.ts";

/** The schema's issues with a given `logit_bias`, pushed onto `issues`. */
export function logitBiasIssues(value: unknown, issues: SchemaIssue[]): void {
  if (value === undefined || value === null) return;
  if (typeof value !== "object" || Array.isArray(value)) {
    issues.push({
      type: "dict_type",
      loc: "body.logit_bias",
      msg: "Input should be a valid dictionary",
      input: value,
    });
    return;
  }
  for (const [key, bias] of Object.entries(value)) {
    const read = laxFloat(bias);
    if (!read.ok) issues.push({ type: read.type, loc: `body.logit_bias.${key}`, msg: read.msg, input: bias });
  }
}

const pythonInt = /^\s*[+-]?\d+(_\d+)*\s*$/;

/** Throws vLLM's 400 for keys that are not token ids (before its sampling checks run). */
export function checkLogitBiasKeys(value: unknown): void {
  if (!value || typeof value !== "object") return;
  const invalid = Object.keys(value).filter((key) => !pythonInt.test(key));
  if (invalid.length > 0) {
    const shown = `[${invalid.map(pythonRepr).join(", ")}]`;
    throw invalidParameter(
      `logit_bias contains key(s) that cannot be converted to integer token IDs: ${shown}`,
      "logit_bias",
      shown,
    );
  }
}

/** Throws vLLM's 400 for token ids outside the vocabulary (after its sampling checks). */
export function checkLogitBiasVocabulary(value: unknown): void {
  if (!value || typeof value !== "object") return;
  const outside = Object.keys(value)
    .map((key) => Number(key.trim().replaceAll("_", "")))
    .filter((id) => id < 0 || id >= simVocabSize);
  if (outside.length > 0) {
    const shown = `[${outside.join(", ")}]`;
    throw invalidParameter(
      `token_id(s) ${shown} in logit_bias contain out-of-vocab token ids. Vocabulary size: ${simVocabSize}`,
      "logit_bias",
      shown,
    );
  }
}
