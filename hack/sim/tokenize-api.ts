/**
 * vLLM's `/tokenize` and `/detokenize` (served for every generative model): a prompt or a chat
 * to `{count, max_model_len, tokens, token_strs}`, and token ids back to `{prompt}`, with the
 * simulator's tokenizer (tokenizer.ts), so counts agree with `usage.prompt_tokens`.
 */
import { laxBool } from "../../lib/lax-bool.ts";
import { messageIssues } from "./chat-messages.ts";
import { requestFields } from "./request-fields.ts";
import type { SimTokenizer } from "./tokenizer.ts";
import { modelNotFound, schemaError } from "./vllm-error.ts";

export function tokenize(
  tokenizer: SimTokenizer,
  rawBody: string,
  servedModelNames: readonly string[],
  maxModelLen: number,
) {
  const { fields, issues, check, checkBool } = requestFields(rawBody);
  check("model", (v) => typeof v === "string", "string_type", "Input should be a valid string");
  checkBool("return_token_strs");
  checkBool("add_generation_prompt");
  const chat = fields.messages !== undefined;
  if (chat) {
    if (!Array.isArray(fields.messages))
      issues.push({
        type: "list_type",
        loc: "body.TokenizeChatRequest.messages",
        msg: "Input should be a valid list",
        input: fields.messages,
      });
    else issues.push(...messageIssues(fields.messages, "body.TokenizeChatRequest.messages"));
  } else if (typeof fields.prompt !== "string") {
    // Neither branch of vLLM's request union fits: pydantic reports both.
    issues.push(
      fields.prompt === undefined
        ? {
            type: "missing",
            loc: "body.TokenizeCompletionRequest.prompt",
            msg: "Field required",
            input: fields,
          }
        : {
            type: "string_type",
            loc: "body.TokenizeCompletionRequest.prompt",
            msg: "Input should be a valid string",
            input: fields.prompt,
          },
      { type: "missing", loc: "body.TokenizeChatRequest.messages", msg: "Field required", input: fields },
    );
  }
  if (issues.length > 0) throw schemaError(issues);
  const model = fields.model as string | null | undefined;
  if (model && !servedModelNames.includes(model)) throw modelNotFound(model, servedModelNames);
  const { ids, pieces } = chat
    ? tokenizer.encodeChat(
        fields.messages as { role?: unknown; content?: unknown }[],
        laxBool(fields.add_generation_prompt) !== false,
      )
    : tokenizer.encode(fields.prompt as string);
  return {
    count: ids.length,
    max_model_len: maxModelLen,
    tokens: ids,
    token_strs: laxBool(fields.return_token_strs) === true ? pieces : null,
  };
}

export function detokenize(tokenizer: SimTokenizer, rawBody: string, servedModelNames: readonly string[]) {
  const { fields, issues, check } = requestFields(rawBody);
  check("model", (v) => typeof v === "string", "string_type", "Input should be a valid string");
  const tokens = fields.tokens;
  if (tokens === undefined)
    issues.push({ type: "missing", loc: "body.tokens", msg: "Field required", input: fields });
  else if (!Array.isArray(tokens))
    issues.push({
      type: "list_type",
      loc: "body.tokens",
      msg: "Input should be a valid list",
      input: tokens,
    });
  else
    tokens.forEach((token, i) => {
      if (!Number.isInteger(token))
        issues.push({
          type: "int_type",
          loc: `body.tokens.${i}`,
          msg: "Input should be a valid integer",
          input: token,
        });
      else if (token < 0)
        issues.push({
          type: "greater_than_equal",
          loc: `body.tokens.${i}`,
          msg: "Input should be greater than or equal to 0",
          input: token,
        });
    });
  if (issues.length > 0) throw schemaError(issues);
  const model = fields.model as string | null | undefined;
  if (model && !servedModelNames.includes(model)) throw modelNotFound(model, servedModelNames);
  return { prompt: tokenizer.decode(tokens as number[]) };
}
