/**
 * Reading `/v1/responses` bodies the way vLLM does for a model without a reasoning or tool parser:
 * schema errors first (400 `Bad Request`, like pydantic), then the model (404), then what vLLM
 * refuses while serving. vLLM keeps no response store unless `VLLM_ENABLE_RESPONSES_API_STORE=1`:
 * without it `store` is ignored and `background` refused.
 */
import { laxBool } from "../../lib/lax-bool.ts";
import { requestFields } from "./request-fields.ts";
import { checkTemperatureAndTopP } from "./sampling-params.ts";
import { countChatTokens } from "./text.ts";
import { errorBody, invalidParameter, modelNotFound, schemaError, VllmHttpError } from "./vllm-error.ts";

export interface ResponsesRequest {
  stream: boolean;
  /** Kept for a retrieve: `store` (true by default) on an engine with a store. */
  store: boolean;
  /** Answered at once, generated after (needs the store). */
  background: boolean;
  previousResponseId: string | undefined;
  /** What the answer may take: `max_output_tokens`, capped by what the context leaves. */
  maxTokens: number;
  /** `max_output_tokens` as asked; undefined: the context's room, which the response reports. */
  maxOutputTokens: number | undefined;
  instructions: string | null;
  temperature: number;
  topP: number;
  seed: number | undefined;
  prompt: { text: string; tokens: number };
}

/** vLLM's own errors while serving a Responses request: `invalid_request_error`, with the field. */
export function responsesError(status: number, message: string, param: string): VllmHttpError {
  return new VllmHttpError(status, errorBody(message, "invalid_request_error", status, param));
}

/** A response this engine did not keep (every one: it has no store), as vLLM says it. */
export function responseNotFound(id: string): VllmHttpError {
  return responsesError(404, `Response with id '${id}' not found.`, "response_id");
}

/** Parses and validates a body; throws a VllmHttpError for whatever vLLM would refuse. */
export function parseResponsesRequest(
  rawBody: string,
  servedModelNames: readonly string[],
  maxModelLen: number,
  storeEnabled: boolean,
): ResponsesRequest {
  const { fields, issues, check, checkBool, checkInt, checkFloat } = requestFields(rawBody);
  const body = fields;
  const string = (v: unknown) => typeof v === "string";
  check("model", string, "string_type", "Input should be a valid string");
  check("instructions", string, "string_type", "Input should be a valid string");
  check("previous_response_id", string, "string_type", "Input should be a valid string");
  checkInt("max_output_tokens");
  checkInt("seed");
  checkFloat("temperature");
  checkFloat("top_p");
  for (const name of ["stream", "store", "background"]) checkBool(name);
  const input = fields.input;
  const items = Array.isArray(input) ? input : undefined;
  if (input === undefined || input === null)
    issues.push({ type: "missing", loc: "body.input", msg: "Field required", input: body });
  else if (typeof input !== "string" && !items)
    issues.push({
      type: "union_type",
      loc: "body.input",
      msg: "Input should be a valid string or list",
      input,
    });
  else
    items?.forEach((item, i) => {
      if (!item || typeof item !== "object" || Array.isArray(item))
        issues.push({
          type: "dict_type",
          loc: `body.input.${i}`,
          msg: "Input should be a valid dictionary",
          input: item,
        });
    });
  if (issues.length > 0) throw schemaError(issues);
  const background = laxBool(fields.background) === true;
  if (background && laxBool(fields.store) === false)
    throw schemaError([
      {
        type: "value_error",
        loc: "body",
        msg: "Value error, background can only be used when `store` is true",
        input: body,
      },
    ]);

  const model = fields.model as string | null | undefined;
  if (model && !servedModelNames.includes(model)) throw modelNotFound(model, servedModelNames);
  // `store` defaults to true, as in OpenAI's API; this engine keeps nothing, so it cannot run later.
  if (background && !storeEnabled)
    throw responsesError(
      400,
      "This vLLM engine does not support `store=True` and therefore does not support the background mode. " +
        "To enable these features, set the environment variable `VLLM_ENABLE_RESPONSES_API_STORE=1` when " +
        "launching the vLLM server.",
      "background",
    );
  if (background && laxBool(fields.stream) === true)
    throw responsesError(
      400,
      "The simulator does not simulate a background stream; ask without `stream`.",
      "stream",
    );

  const instructions = (fields.instructions as string | null | undefined) ?? null;
  const messages: { role?: unknown; content?: unknown }[] = [
    ...(instructions !== null ? [{ role: "system", content: instructions }] : []),
    ...(items
      ? (items as Record<string, unknown>[]).map((item) => ({
          role: item.role ?? item.type,
          content: item.content ?? item.output ?? item.arguments ?? "",
        }))
      : [{ role: "user", content: input }]),
  ];
  const tokens = countChatTokens(messages);
  if (tokens >= maxModelLen)
    throw responsesError(
      400,
      `The engine prompt length ${tokens} exceeds the max_model_len ${maxModelLen}. Please reduce prompt.`,
      "input",
    );
  checkTemperatureAndTopP(fields);
  const maxOutputTokens = (fields.max_output_tokens as number | null | undefined) ?? undefined;
  // vLLM's sampling parameters refuse it, under the name they give it.
  if (maxOutputTokens !== undefined && maxOutputTokens < 1)
    throw invalidParameter(
      `max_tokens must be at least 1, got ${maxOutputTokens}.`,
      "max_tokens",
      maxOutputTokens,
    );
  const room = maxModelLen - tokens;
  return {
    stream: laxBool(fields.stream) === true,
    store: storeEnabled && laxBool(fields.store) !== false,
    background,
    previousResponseId: (fields.previous_response_id as string | null | undefined) || undefined,
    maxTokens: maxOutputTokens === undefined ? room : Math.min(room, maxOutputTokens),
    maxOutputTokens,
    instructions,
    temperature: (fields.temperature as number | null | undefined) ?? 1,
    topP: (fields.top_p as number | null | undefined) ?? 1,
    seed: (fields.seed as number | null | undefined) ?? undefined,
    prompt: { text: JSON.stringify(messages.map((m) => [m.role, m.content])), tokens },
  };
}
