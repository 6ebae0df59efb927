/**
 * Reading `/v1/chat/completions` and `/v1/completions` bodies the way vLLM 0.33
 * does: its checks of the raw body first (400 `BadRequestError` naming the
 * parameter), then the schema (400 `Bad Request`, like pydantic), then the model
 * (404), then what rendering the prompt finds (tools without a parser, a
 * context too long), each as vLLM answers it.
 */
import { laxBool } from "../../lib/lax-bool.ts";
import { messageIssues } from "./chat-messages.ts";
import { checkRequestedOutput, type OutputRequest, outputBudget } from "./context-length.ts";
import { type JsonFormat, jsonFormat } from "./json-output.ts";
import { checkLogitBiasKeys, checkLogitBiasVocabulary, logitBiasIssues } from "./logit-bias.ts";
import { maxLogprobs, simVocabSize } from "./logprobs.ts";
import { pythonTruthy } from "./python-truthy.ts";
import { boolIssue, requestFields } from "./request-fields.ts";
import { checkSamplingParams } from "./sampling-params.ts";
import { type StopRule, stopStrings } from "./stop-strings.ts";
import { countChatTokens, countTokens } from "./text.ts";
import type { ToolUse } from "./tool-call.ts";
import { checkToolUsage, toolUse, unparsedToolChoice } from "./tool-choice.ts";
import { badRequest, invalidParameter, modelNotFound, type SchemaIssue, schemaError } from "./vllm-error.ts";

/** vLLM's default `max_tokens` of a completion (chat's is what the context leaves). */
const completionDefaultMaxTokens = 16;

export type ApiKind = "chat" | "completion";

export interface OpenAIRequest {
  kind: ApiKind;
  stream: boolean;
  includeUsage: boolean;
  continuousUsage: boolean;
  minTokens: number | undefined;
  ignoreEos: boolean;
  n: number;
  seed: number | undefined;
  stop: StopRule;
  /**
   * Log probabilities asked for: how many candidates each token lists (chat's `top_logprobs`,
   * completions' `logprobs`); undefined when none are asked.
   */
  logprobs: number | undefined;
  /** Completions: the prompt comes back before the answer; chat: the last message, if the assistant's. */
  echo: boolean;
  /**
   * A completion's `echo` with `max_tokens: 0`: the prompt alone comes back (vLLM generates one
   * token it does not show), as harnesses that score a text ask.
   */
  echoOnly: boolean;
  /** `response_format` asking for JSON; undefined: free text. */
  jsonFormat: JsonFormat | undefined;
  /** Chat with a tool parser: the tools the model may call; undefined: it answers in text. */
  toolUse: ToolUse | undefined;
  /** Chat: the last message's text when it is the assistant's (what `echo` repeats). */
  assistantPrefix: string | undefined;
  /**
   * The body's `request_id` (vLLM's extension), when a non-empty string: what vLLM names the request
   * by when no `X-Request-Id` header names it.
   */
  requestId: string | undefined;
  /**
   * One entry per prompt (completions accept a batch); each yields `n` choices of at most
   * `maxTokens` (`max_tokens` capped by what the context leaves).
   */
  prompts: { text: string; tokens: number; maxTokens: number }[];
}

/**
 * Parses and validates a body; throws a VllmHttpError for whatever vLLM would refuse.
 * `toolParser`: the engine has vLLM's tool parser (`--enable-auto-tool-choice` with
 * `--tool-call-parser`), so a chat's tools may be called.
 */
export function parseOpenAIRequest(
  kind: ApiKind,
  rawBody: string,
  servedModelNames: readonly string[],
  maxModelLen: number,
  toolParser = false,
): OpenAIRequest {
  const { fields, issues, check, checkBool, checkInt, checkFloat } = requestFields(rawBody);
  // vLLM's checks of the raw body (pydantic "before" validators) run ahead of its schema.
  if (pythonTruthy(fields.stream_options) && !pythonTruthy(fields.stream))
    throw invalidParameter("Stream options can only be defined when `stream=True`.", "stream_options");
  const toolChoice = kind === "chat" ? checkToolUsage(fields) : undefined;
  if (
    kind === "completion" &&
    (fields.prompt === undefined || fields.prompt === null || fields.prompt === "")
  )
    throw invalidParameter("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");
  checkLogprobFields(kind, fields);
  const format = fields.response_format as { type?: unknown; json_schema?: unknown } | null | undefined;
  if (format && typeof format === "object" && format.type === "json_schema" && format.json_schema == null)
    throw invalidParameter(
      "When response_format type is 'json_schema', the 'json_schema' field must be provided.",
      "response_format",
    );
  // Pydantic reports the fields' errors in the order the request model declares them.
  const stringField = (name: string) =>
    check(name, (v) => typeof v === "string", "string_type", "Input should be a valid string");
  const stop = () =>
    check(
      "stop",
      (v) => typeof v === "string" || (Array.isArray(v) && v.every((item) => typeof item === "string")),
      "union_type",
      "Input should be a valid string or list of strings",
    );
  const streamOptionsField = () => {
    check(
      "stream_options",
      (v) => !!v && typeof v === "object" && !Array.isArray(v),
      "model_type",
      "Input should be a valid dictionary or instance of StreamOptions",
    );
    const options = fields.stream_options;
    if (!options || typeof options !== "object" || Array.isArray(options)) return;
    for (const name of ["include_usage", "continuous_usage_stats"]) {
      const issue = boolIssue((options as Record<string, unknown>)[name], `body.stream_options.${name}`);
      if (issue) issues.push(issue);
    }
  };
  // vLLM's seed is a 64-bit integer (`Field(ge=-2**63, le=2**63 - 1)`).
  const seed = () => checkInt("seed", { ge: -(2n ** 63n), le: 2n ** 63n - 1n });
  const samplingExtras = () => {
    checkInt("top_k");
    checkFloat("min_p");
    checkFloat("repetition_penalty");
    checkInt("prompt_logprobs");
  };
  const tail = () => {
    checkBool("include_stop_str_in_output");
    checkBool("ignore_eos");
    checkInt("min_tokens");
  };
  let prompts: PromptText[] = [];
  if (kind === "chat") {
    prompts = chatPrompt(fields, issues);
    stringField("model");
    checkFloat("frequency_penalty");
    logitBiasIssues(fields.logit_bias, issues);
    checkBool("logprobs");
    checkInt("top_logprobs");
    for (const name of ["max_tokens", "max_completion_tokens", "n"]) checkInt(name);
    checkFloat("presence_penalty");
    seed();
    stop();
    checkBool("stream");
    streamOptionsField();
    checkFloat("temperature");
    checkFloat("top_p");
    stringField("user");
    samplingExtras();
    tail();
    checkBool("echo");
  } else {
    stringField("model");
    prompts = completionPrompt(fields, issues);
    checkBool("echo");
    checkFloat("frequency_penalty");
    logitBiasIssues(fields.logit_bias, issues);
    checkInt("logprobs");
    for (const name of ["max_tokens", "n"]) checkInt(name);
    checkFloat("presence_penalty");
    seed();
    stop();
    checkBool("stream");
    streamOptionsField();
    stringField("suffix");
    checkFloat("temperature");
    checkFloat("top_p");
    stringField("user");
    samplingExtras();
    tail();
  }
  if (issues.length > 0) throw schemaError(issues);

  const stream = laxBool(fields.stream) === true;
  const streamOptions = fields.stream_options as Record<string, unknown> | null | undefined;
  if (kind === "completion" && (prompts.length === 0 || prompts.some((p) => p.text === "" && p.tokens === 0)))
    throw invalidParameter("Either prompt or prompt_embeds must be provided and non-empty.", "prompt");

  const model = fields.model as string | null | undefined;
  if (model && !servedModelNames.includes(model)) throw modelNotFound(model, servedModelNames);
  const unparsed = toolParser ? undefined : unparsedToolChoice(toolChoice);
  if (unparsed) throw unparsed;
  if (kind === "completion") checkSuffix(fields);

  const output = requestedOutput(kind, fields, maxModelLen);
  checkRequestedOutput(output);
  const budgets = prompts.map((prompt) => outputBudget(prompt.tokens, prompt.fromText, output));
  // vLLM converts the keys while building its sampling parameters, and checks the vocabulary after.
  checkLogitBiasKeys(fields.logit_bias);
  checkSamplingParams(fields, budgets);
  checkLogitBiasVocabulary(fields.logit_bias);
  const n = (fields.n as number | null | undefined) ?? 1;
  const logprobs =
    kind === "chat"
      ? laxBool(fields.logprobs) === true
        ? ((fields.top_logprobs as number | null | undefined) ?? 0)
        : undefined
      : ((fields.logprobs as number | null | undefined) ?? undefined);
  const asked = logprobs === -1 ? simVocabSize : logprobs;
  if (asked !== undefined && asked > maxLogprobs)
    throw invalidParameter(
      `Requested sample logprobs of ${asked}, which is greater than max allowed: ${maxLogprobs}`,
      "logprobs",
      asked,
    );
  const promptLogprobs = fields.prompt_logprobs as number | null | undefined;
  const askedOfPrompt = promptLogprobs === -1 ? simVocabSize : promptLogprobs;
  if (askedOfPrompt && askedOfPrompt > maxLogprobs)
    throw invalidParameter(
      `Requested prompt logprobs of ${askedOfPrompt}, which is greater than max allowed: ${maxLogprobs}`,
      "prompt_logprobs",
      askedOfPrompt,
    );
  for (const prompt of prompts) if (prompt.ids) checkVocabulary(prompt.ids);
  const minTokens = (fields.min_tokens as number | null | undefined) ?? undefined;

  return {
    kind,
    stream,
    ...streamUsage(stream, streamOptions),
    minTokens,
    ignoreEos: laxBool(fields.ignore_eos) === true,
    n,
    seed: (fields.seed as number | null | undefined) ?? undefined,
    stop: {
      strings: stopStrings(fields.stop),
      minTokens: minTokens ?? 0,
      includeInOutput: laxBool(fields.include_stop_str_in_output) === true,
    },
    logprobs: logprobs === -1 ? maxLogprobs : logprobs,
    echo: laxBool(fields.echo) === true,
    echoOnly: echoOnly(kind, fields),
    jsonFormat: jsonFormat(fields.response_format),
    toolUse: kind === "chat" && toolParser ? toolUse(fields, toolChoice) : undefined,
    assistantPrefix: kind === "chat" ? assistantPrefix(fields.messages) : undefined,
    requestId:
      typeof fields.request_id === "string" && fields.request_id !== "" ? fields.request_id : undefined,
    prompts: prompts.map((prompt, i) => ({
      text: prompt.text,
      tokens: prompt.tokens,
      maxTokens: budgets[i]!,
    })),
  };
}

/**
 * What a stream reports of usage, as vLLM's serving code reads `stream_options`: its
 * `include_usage` defaults to true (`StreamOptions.include_usage: bool | None = True`), so
 * `stream_options: {}` asks for the final usage chunk; an explicit null is off; continuous usage
 * needs both.
 */
function streamUsage(
  stream: boolean,
  options: Record<string, unknown> | null | undefined,
): { includeUsage: boolean; continuousUsage: boolean } {
  if (!stream || !options) return { includeUsage: false, continuousUsage: false };
  const includeUsage = "include_usage" in options ? laxBool(options.include_usage) === true : true;
  return { includeUsage, continuousUsage: includeUsage && laxBool(options.continuous_usage_stats) === true };
}

/** vLLM's checks of the raw logprob fields, ahead of the schema (its `check_logprobs`). */
function checkLogprobFields(kind: ApiKind, fields: Record<string, unknown>): void {
  const name = kind === "chat" ? "top_logprobs" : "logprobs";
  // Python's bool is an int, so true and false pass as 1 and 0.
  const given = (field: string) => {
    const value = fields[field];
    if (value === undefined || value === null) return undefined;
    if (typeof value === "boolean") return Number(value);
    if (typeof value !== "number") throw invalidParameter(`\`${field}\` must be an integer.`, field, value);
    return value;
  };
  const prompt = given("prompt_logprobs");
  const value = given(name);
  if (prompt !== undefined) {
    if (pythonTruthy(fields.stream) && (prompt > 0 || prompt === -1))
      throw invalidParameter("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs");
    if (prompt < 0 && prompt !== -1)
      throw invalidParameter("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs", prompt);
  }
  if (value === undefined) return;
  if (value < 0 && value !== -1)
    throw invalidParameter(`\`${name}\` must be a positive value or -1.`, name, value);
  if (kind === "chat" && (value === -1 || value > 0) && !pythonTruthy(fields.logprobs))
    throw invalidParameter("when using `top_logprobs`, `logprobs` must be set to true.", name);
}

/** The last message's text when the assistant wrote it: what chat's `echo` puts before the answer. */
function assistantPrefix(messages: unknown): string | undefined {
  if (!Array.isArray(messages)) return undefined;
  const last = messages.at(-1) as { role?: unknown; content?: unknown } | undefined;
  if (last?.role !== "assistant") return undefined;
  if (typeof last.content === "string") return last.content;
  if (!Array.isArray(last.content)) return "";
  return last.content.map((part) => String((part as { text?: unknown })?.text ?? "")).join("\n");
}

/** Chat `messages`: a list of objects with a `role`; its issues are pushed onto `issues`. */
function chatPrompt(body: Record<string, unknown>, issues: SchemaIssue[]): PromptText[] {
  const fields = body;
  const before = issues.length;
  let prompts: PromptText[] = [];
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
    issues.push(...messageIssues(messages, "body.messages"));
    if (issues.length === before) {
      const list = messages as { role: string; content?: unknown }[];
      prompts = [
        {
          text: JSON.stringify(list.map((m) => [m.role, m.content])),
          tokens: countChatTokens(list),
          fromText: true,
        },
      ];
    }
  }
  return prompts;
}

/** A completion's `prompt` (absent or null is refused earlier, by vLLM's own check). */
function completionPrompt(fields: Record<string, unknown>, issues: SchemaIssue[]): PromptText[] {
  let prompts: PromptText[] = [];
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
  return prompts;
}

interface PromptText {
  text: string;
  tokens: number;
  /** Tokenized from text (a chat, a string), not given as token ids. */
  fromText: boolean;
  /** The token ids given instead of text. */
  ids?: readonly number[];
}

/**
 * A completion's `suffix` asks for fill-in-the-middle, which vLLM renders only for models with a
 * FIM template; the simulated model has none, so vLLM's renderer refuses it, as it does here.
 */
function checkSuffix(fields: Record<string, unknown>): void {
  if (fields.suffix === undefined || fields.suffix === null) return;
  if (laxBool(fields.echo) === true) throw badRequest("Echo is unsupported with suffix.", "suffix");
  const prompt = fields.prompt;
  if (
    typeof prompt === "string" ||
    (Array.isArray(prompt) && prompt.every((item) => typeof item === "string"))
  )
    throw badRequest("suffix is only supported for models with FIM completion rendering", "suffix");
  throw badRequest("suffix requires text prompt input for FIM completion rendering", "suffix");
}

/** vLLM's engine refuses a token id outside the vocabulary (it names no parameter). */
function checkVocabulary(ids: readonly number[]): void {
  let lowest = 0;
  let highest = 0;
  for (const id of ids) {
    if (id < lowest) lowest = id;
    if (id > highest) highest = id;
  }
  if (lowest < 0) throw badRequest(`Token id ${lowest} is out of vocabulary`);
  if (highest > simVocabSize - 1) throw badRequest(`Token id ${highest} is out of vocabulary`);
}

/** The output a request asks for: chat's `max_completion_tokens` before `max_tokens`; a completion's `max_tokens`, 16 unless given. */
function requestedOutput(kind: ApiKind, fields: Record<string, unknown>, maxModelLen: number): OutputRequest {
  if (kind === "completion")
    return {
      // vLLM samples one token for an echo without generation, and shows none of it.
      requested: echoOnly(kind, fields)
        ? 1
        : ((fields.max_tokens as number | null | undefined) ?? completionDefaultMaxTokens),
      requestedName: "max_tokens",
      maxModelLen,
    };
  const completionTokens = fields.max_completion_tokens as number | null | undefined;
  if (completionTokens !== undefined && completionTokens !== null)
    return { requested: completionTokens, requestedName: "max_completion_tokens", maxModelLen };
  return {
    requested: (fields.max_tokens as number | null | undefined) ?? undefined,
    requestedName: "max_tokens",
    maxModelLen,
  };
}

/** A completion that asks for its prompt back and no generation (vLLM's `echo_without_generation`). */
function echoOnly(kind: ApiKind, fields: Record<string, unknown>): boolean {
  return kind === "completion" && laxBool(fields.echo) === true && fields.max_tokens === 0;
}

/** A completion `prompt`: a string, a list of strings, a token list, or a list of token lists. */
function completionPrompts(prompt: unknown): PromptText[] | undefined {
  if (typeof prompt === "string") return [{ text: prompt, tokens: countTokens(prompt), fromText: true }];
  if (!Array.isArray(prompt)) return undefined;
  if (prompt.every((item) => Number.isInteger(item))) {
    return [{ text: prompt.join(","), tokens: prompt.length, fromText: false, ids: prompt as number[] }];
  }
  if (prompt.every((item) => typeof item === "string")) {
    return (prompt as string[]).map((text) => ({ text, tokens: countTokens(text), fromText: true }));
  }
  if (prompt.every((item) => Array.isArray(item) && item.every((token) => Number.isInteger(token)))) {
    return (prompt as number[][]).map((tokens) => ({
      text: tokens.join(","),
      tokens: tokens.length,
      fromText: false,
      ids: tokens,
    }));
  }
  return undefined;
}
