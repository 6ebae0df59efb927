/**
 * How many tokens a chat or completion prompt may generate, checked as vLLM 0.33 checks it:
 * - the requested output alone past the context is refused while the prompt is rendered;
 * - a prompt longer than the context is refused (a text prompt is tokenized with one token past
 *   the context as its limit, so vLLM can only say "at least" that many);
 * - otherwise the output is capped by what the context leaves (`get_max_tokens`): a prompt plus
 *   `max_tokens` beyond the context is served, not refused, and ends with `length`;
 * - a budget below 1 (asked for, or a prompt that fills the context) is the sampling parameters'
 *   `max_tokens must be at least 1`.
 */
import { invalidParameter } from "./vllm-error.ts";

export interface OutputRequest {
  /** `max_tokens` or `max_completion_tokens` as asked; undefined: no limit asked. */
  requested: number | undefined;
  /** The field it came from, as vLLM names it in its messages. */
  requestedName: string;
  maxModelLen: number;
}

/** Throws vLLM's 400 when the requested output alone does not fit the context. */
export function checkRequestedOutput({ requested, requestedName, maxModelLen }: OutputRequest): void {
  if (requested !== undefined && requested > maxModelLen)
    throw invalidParameter(
      `${requestedName}=${requested} cannot be greater than max_model_len=${maxModelLen}. ` +
        "Please request fewer output tokens.",
      requestedName,
      requested,
    );
}

/** The output budget of one prompt of `promptTokens` (`fromText`: tokenized from text). */
export function outputBudget(
  promptTokens: number,
  fromText: boolean,
  { requested, maxModelLen }: OutputRequest,
): number {
  if (promptTokens > maxModelLen) {
    // The tokenizer stops one token past the context, so a longer text counts that many.
    const counted = fromText ? Math.min(promptTokens, maxModelLen + 1) : promptTokens;
    const qualifier = counted === maxModelLen + 1 ? "at least " : "";
    throw invalidParameter(
      `This model's maximum context length is ${maxModelLen} tokens. However, your prompt contains ` +
        `${qualifier}${counted} input tokens, which exceeds this limit even without any output tokens. ` +
        "Please reduce the length of the input prompt.",
      "input_tokens",
      counted,
    );
  }
  const budget = Math.min(maxModelLen - promptTokens, requested ?? Number.POSITIVE_INFINITY);
  if (budget < 1)
    throw invalidParameter(`max_tokens must be at least 1, got ${budget}.`, "max_tokens", budget);
  return budget;
}
