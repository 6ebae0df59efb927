/**
 * vLLM's checks of a request's sampling parameters (`SamplingParams._verify_args`), in its order:
 * the values a schema lets through but sampling cannot use, each a 400 `BadRequestError`. The
 * simulator samples nothing with most of them, but a client that sends `temperature: -1` learns
 * of its mistake from vLLM, so it does from the simulator too.
 */
import { pythonFloat } from "./lax-float.ts";
import { stopStrings } from "./stop-strings.ts";
import { badRequest, invalidParameter } from "./vllm-error.ts";

/** vLLM's `VLLM_MAX_N_SEQUENCES` default: the most choices one request may ask for. */
export const maxNSequences = 16_384;

/** The fields as read by the schema (request-fields.ts): numbers already numbers, null as absent. */
type Fields = Record<string, unknown>;

/**
 * Throws vLLM's 400 for the first sampling parameter it refuses. `maxTokens`: each prompt's
 * output budget (`max_tokens` capped by what the context leaves), as vLLM's sampling parameters
 * carry it.
 */
export function checkSamplingParams(fields: Fields, maxTokens: readonly number[]): void {
  const number = (name: string, fallback: number) => (fields[name] as number | null | undefined) ?? fallback;
  const n = number("n", 1);
  // vLLM names no parameter for these: its message is all there is.
  if (n < 1) throw badRequest(`n must be at least 1, got ${n}.`);
  if (n > maxNSequences)
    throw badRequest(
      `n must be at most ${maxNSequences}, got ${pythonInt(n)}. ` +
        "To increase this limit, set the VLLM_MAX_N_SEQUENCES environment variable.",
    );
  for (const name of ["presence_penalty", "frequency_penalty"]) {
    const penalty = number(name, 0);
    if (!(penalty >= -2 && penalty <= 2))
      throw badRequest(`${name} must be in [-2, 2], got ${pythonFloat(penalty)}.`);
  }
  const repetition = number("repetition_penalty", 1);
  if (!Number.isFinite(repetition))
    throw badRequest(`repetition_penalty must be a finite number, got ${pythonFloat(repetition)}.`);
  if (repetition <= 0)
    throw badRequest(`repetition_penalty must be greater than zero, got ${pythonFloat(repetition)}.`);
  checkTemperatureAndTopP(fields);
  const topK = number("top_k", 0);
  if (topK < -1) throw badRequest(`top_k must be 0 (disable), or at least 1, got ${pythonInt(topK)}.`);
  const minP = number("min_p", 0);
  if (!(minP >= 0 && minP <= 1)) throw badRequest(`min_p must be in [0, 1], got ${pythonFloat(minP)}.`);
  const minTokens = number("min_tokens", 0);
  if (minTokens < 0)
    throw badRequest(`min_tokens must be greater than or equal to 0, got ${pythonInt(minTokens)}.`);
  for (const budget of maxTokens)
    if (minTokens > budget)
      throw badRequest(
        `min_tokens must be less than or equal to max_tokens=${budget}, got ${pythonInt(minTokens)}.`,
      );
  if (stopStrings(fields.stop).some((stop) => stop === ""))
    throw badRequest("stop cannot contain an empty string.");
}

/**
 * The two sampling parameters every generating route takes (the Responses API too), checked in
 * vLLM's order; absent or null they are vLLM's defaults, which pass.
 */
export function checkTemperatureAndTopP(fields: Fields): void {
  const temperature = (fields.temperature as number | null | undefined) ?? 1;
  const shown = pythonFloat(temperature);
  if (!Number.isFinite(temperature))
    throw invalidParameter(`temperature must be a finite number, got ${shown}.`, "temperature", shown);
  if (temperature < 0)
    throw invalidParameter(`temperature must be non-negative, got ${shown}.`, "temperature", shown);
  if (temperature > 2)
    throw invalidParameter(`temperature must be in [0, 2], got ${shown}.`, "temperature", shown);
  const topP = (fields.top_p as number | null | undefined) ?? 1;
  if (!(topP > 0 && topP <= 1))
    throw invalidParameter(`top_p must be in (0, 1], got ${pythonFloat(topP)}.`, "top_p", pythonFloat(topP));
}

/** An integer as Python prints it: every digit, never an exponent. */
function pythonInt(value: number): string {
  return Number.isSafeInteger(value) ? String(value) : BigInt(value).toString();
}
