/**
 * Reading `/v1/chat/completions` and `/v1/completions` bodies the way vLLM
 * does: schema errors first (400 `Bad Request`, like pydantic), then value
 * errors while serving (400 `BadRequestError`), then the model (404).
 */
import { laxBool } from "../../lib/lax-bool.ts";
import { requestFields } from "./request-fields.ts";
import { countChatTokens, countTokens } from "./text.ts";
import {
  badRequest,
  invalidParameter,
  modelNotFound,
  schemaError,
  type VllmHttpError,
} from "./vllm-error.ts";

export type ApiKind = "chat" | "completion";

export interface OpenAIRequest {
  kind: ApiKind;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  /** Undefined: up to the context length, as vLLM's default. */
  maxTokens: number | undefined;
  minTokens: number | undefined;
  ignoreEos: boolean;
  n: number;
  seed: number | undefined;
  /** One entry per prompt (completions accept a batch); each yields `n` choices. */
  prompts: { text: string; tokens: number }[];
}

/** Parses and validates a body; throws a VllmHttpError for whatever vLLM would refuse. */
export function parseOpenAIRequest(
  kind: ApiKind,
  rawBody: string,
  servedModelNames: readonly string[],
  maxModelLen: number,
): OpenAIRequest {
  const { fields, issues, check, checkBool } = requestFields(rawBody);
  const body = fields;
  const isInt = (value: unknown) => Number.isInteger(value);
  check("model", (v) => typeof v === "string", "string_type", "Input should be a valid string");
  checkBool("stream");
  for (const name of ["max_tokens", "max_completion_tokens", "min_tokens", "n", "seed"]) {
    check(name, isInt, "int_type", "Input should be a valid integer");
  }
  checkBool("ignore_eos");
  check(
    "stream_options",
    (v) => !!v && typeof v === "object" && !Array.isArray(v),
    "model_type",
    "Input should be a valid dictionary or instance of StreamOptions",
  );

  let prompts: { text: string; tokens: number }[] = [];
  if (kind === "chat") {
    const messages = fields.messages;
    if (messages === undefined) {
      issues.push({ type: "missing", loc: "body.messages", msg: "Field required", input: body });
    } else if (!Array.isArray(messages)) {
      issues.push({
        type: "list_type",
        loc: "body.messages",
        msg: "Input should be a valid list",
        input: messages,
      });
    } else {
      messages.forEach((message, i) => {
        if (!message || typeof message !== "object" || Array.isArray(message)) {
          issues.push({
            type: "dict_type",
            loc: `body.messages.${i}`,
            msg: "Input should be a valid dictionary",
            input: message,
          });
        } else if (typeof (message as { role?: unknown }).role !== "string") {
          issues.push({
            type: "missing",
            loc: `body.messages.${i}.role`,
            msg: "Field required",
            input: message,
          });
        }
      });
      if (issues.length === 0) {
        const list = messages as { role: string; content?: unknown }[];
        prompts = [
          { text: JSON.stringify(list.map((m) => [m.role, m.content])), tokens: countChatTokens(list) },
        ];
      }
    }
  } else {
    const prompt = fields.prompt;
    if (prompt !== undefined && prompt !== null) {
      const parsed = completionPrompts(prompt);
      if (parsed === undefined) {
        issues.push({
          type: "union_type",
          loc: "body.prompt",
          msg: "Input should be a valid string or list",
          input: prompt,
        });
      } else {
        prompts = parsed;
      }
    }
  }
  if (issues.length > 0) throw schemaError(issues);

  const stream = laxBool(fields.stream) === true;
  const streamOptions = fields.stream_options as Record<string, unknown> | null | undefined;
  if (streamOptions && !stream) {
    throw schemaError([
      {
        type: "value_error",
        loc: "body",
        msg: "Value error, Stream options can only be defined when `stream=True`.",
        input: body,
      },
    ]);
  }
  if (
    kind === "completion" &&
    (prompts.length === 0 || prompts.some((p) => p.text === "" && p.tokens === 0))
  ) {
    throw badRequest("Either prompt or prompt_embeds must be provided and non-empty.");
  }

  const maxTokens = (fields.max_completion_tokens ?? fields.max_tokens) as number | null | undefined;
  const maxTokensName = fields.max_completion_tokens != null ? "max_completion_tokens" : "max_tokens";
  const n = (fields.n as number | null | undefined) ?? 1;
  if (n < 1) throw invalidParameter(`n must be at least 1, got ${n}.`, "n", n);
  if (maxTokens != null && maxTokens < 1) {
    throw invalidParameter(`max_tokens must be at least 1, got ${maxTokens}.`, "max_tokens", maxTokens);
  }
  const model = fields.model as string | null | undefined;
  if (model && !servedModelNames.includes(model)) throw modelNotFound(model);
  for (const prompt of prompts)
    contextCheck(prompt.tokens, maxTokens ?? undefined, maxTokensName, maxModelLen);

  return {
    kind,
    stream,
    includeUsage: stream && streamOptions?.include_usage === true,
    continuousUsage:
      stream && streamOptions?.include_usage === true && streamOptions.continuous_usage_stats === true,
    maxTokens: maxTokens ?? undefined,
    minTokens: (fields.min_tokens as number | null | undefined) ?? undefined,
    ignoreEos: laxBool(fields.ignore_eos) === true,
    n,
    seed: (fields.seed as number | null | undefined) ?? undefined,
    prompts,
  };
}

/** A completion `prompt`: a string, a list of strings, a token list, or a list of token lists. */
function completionPrompts(prompt: unknown): { text: string; tokens: number }[] | undefined {
  if (typeof prompt === "string") return [{ text: prompt, tokens: countTokens(prompt) }];
  if (!Array.isArray(prompt)) return undefined;
  if (prompt.every((item) => Number.isInteger(item))) {
    return [{ text: prompt.join(","), tokens: prompt.length }];
  }
  if (prompt.every((item) => typeof item === "string")) {
    return (prompt as string[]).map((text) => ({ text, tokens: countTokens(text) }));
  }
  if (prompt.every((item) => Array.isArray(item) && item.every((token) => Number.isInteger(token)))) {
    return (prompt as number[][]).map((tokens) => ({ text: tokens.join(","), tokens: tokens.length }));
  }
  return undefined;
}

function contextCheck(
  promptTokens: number,
  maxTokens: number | undefined,
  name: string,
  maxModelLen: number,
): void {
  if (promptTokens >= maxModelLen) {
    const error: VllmHttpError = badRequest(
      `This model's maximum context length is ${maxModelLen} tokens. However, your request has ${promptTokens} ` +
        "input tokens. Please reduce the length of the input messages.",
      "input_tokens",
    );
    throw error;
  }
  if (maxTokens !== undefined && promptTokens + maxTokens > maxModelLen) {
    throw invalidParameter(
      `'max_tokens' or 'max_completion_tokens' is too large: ${maxTokens}. This model's maximum context length ` +
        `is ${maxModelLen} tokens and your request has ${promptTokens} input tokens ` +
        `(${maxTokens} > ${maxModelLen} - ${promptTokens}).`,
      name,
      maxTokens,
    );
  }
}
