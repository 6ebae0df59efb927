/**
 * The error body every Snooze HTTP surface answers with, shaped like OpenAI's so
 * existing clients show the message: {"error":{"message","type","code","param"}}.
 */
export interface OpenAIErrorBody {
  error: { message: string; type: string; code: string | null; param: string | null };
}

export function openAIError(
  message: string,
  type: string,
  code: string | null = null,
  param: string | null = null,
): OpenAIErrorBody {
  return { error: { message, type, code, param } };
}
