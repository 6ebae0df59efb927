/**
 * Serving a generation as vLLM's OpenAI server answers it: one JSON response,
 * or SSE chunks (`data: {...}\n\n`, then `data: [DONE]`) whose shapes follow
 * vLLM's serving code, including its quirks:
 * - streaming headers go out at once; the role chunk comes with the first token;
 * - the last token of a choice rides in the chunk that carries `finish_reason`;
 * - a choice aborted before its first token gets no chunk of its own;
 * - chat chunks omit `usage`, completion chunks carry `"usage": null`;
 * - `stream_options.include_usage` adds a final chunk with `choices: []`;
 * - `model` in responses is the first served model name, whatever alias was asked.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SimEngine, StepDelta } from "./engine.ts";
import type { OpenAIRequest } from "./openai-request.ts";
import { planOutput } from "./text.ts";

interface ChoiceState {
  promptIndex: number;
  text: string;
  tokens: number;
  finishReason: string | null;
}

export async function serveGeneration(
  engine: SimEngine,
  request: OpenAIRequest,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const chat = request.kind === "chat";
  const baseId = (req.headers["x-request-id"] as string | undefined) ?? randomUUID().replaceAll("-", "");
  const id = `${chat ? "chatcmpl" : "cmpl"}-${baseId}`;
  const created = Math.floor(Date.now() / 1000);
  const model = engine.modelName;
  const object = chat ? "chat.completion.chunk" : "text_completion";
  const promptTokens = request.prompts.reduce((sum, prompt) => sum + prompt.tokens, 0);
  const choices: ChoiceState[] = request.prompts.flatMap((_prompt, promptIndex) =>
    Array.from({ length: request.n }, () => ({ promptIndex, text: "", tokens: 0, finishReason: null })),
  );
  const usage = (completion: number) => ({
    prompt_tokens: promptTokens,
    total_tokens: promptTokens + completion,
    completion_tokens: completion,
  });
  const completionTokens = () => choices.reduce((sum, choice) => sum + choice.tokens, 0);

  let open = true;
  res.on("error", () => {});
  const write = (data: string) => {
    if (open && engine.phase !== "dead") res.write(data);
  };
  const sendChunk = (chunk: unknown) => write(`data: ${JSON.stringify(chunk)}\n\n`);

  if (request.stream) {
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.flushHeaders();
  }
  let firstStep = true;

  const onStep = (deltas: StepDelta[]) => {
    for (const delta of deltas) {
      const choice = choices[delta.choice]!;
      if (delta.text !== "") choice.tokens += 1;
      choice.text += delta.text;
      choice.finishReason = delta.finishReason;
    }
    if (!request.stream) return;
    if (chat && firstStep) {
      choices.forEach((_choice, index) => {
        const chunk: Record<string, unknown> = {
          id,
          object,
          created,
          model,
          choices: [
            { index, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
          ],
        };
        if (request.continuousUsage) chunk.usage = usage(0);
        sendChunk(chunk);
      });
    }
    firstStep = false;
    for (const delta of deltas) {
      const choice = choices[delta.choice]!;
      // vLLM skips an output without text or tokens when nothing was sent before.
      if (delta.text === "" && choice.tokens === 0) continue;
      const finished = delta.finishReason !== null;
      const choiceData: Record<string, unknown> = chat
        ? {
            index: delta.choice,
            delta: { content: delta.text },
            logprobs: null,
            finish_reason: delta.finishReason,
          }
        : {
            index: delta.choice,
            text: delta.text,
            logprobs: null,
            finish_reason: delta.finishReason,
            stop_reason: null,
          };
      if (chat && finished) choiceData.stop_reason = null;
      const chunk: Record<string, unknown> = { id, object, created, model, choices: [choiceData] };
      if (request.continuousUsage) chunk.usage = usage(choice.tokens);
      else if (!chat) chunk.usage = null;
      sendChunk(chunk);
    }
  };

  const generation = engine.submit({
    promptTokens,
    plan: (garbage) =>
      choices.map((choice, index) => {
        const prompt = request.prompts[choice.promptIndex]!;
        return planOutput({
          prompt: prompt.text,
          engineSeed: engine.options.seed,
          requestSeed: request.seed,
          choiceIndex: index % request.n,
          maxTokens: prompt.maxTokens,
          minTokens: request.minTokens,
          ignoreEos: request.ignoreEos,
          garbage,
        });
      }),
    onStep,
  });
  res.on("close", () => {
    open = false;
    if (!res.writableFinished) generation.cancel();
  });
  res.on("finish", () => engine.requestCompleted());

  await generation.done;
  if (!open || engine.phase === "dead") return;

  if (request.stream) {
    if (request.includeUsage)
      sendChunk({ id, object, created, model, choices: [], usage: usage(completionTokens()) });
    write("data: [DONE]\n\n");
    res.end();
    return;
  }
  const body = chat
    ? {
        id,
        object: "chat.completion",
        created,
        model,
        choices: choices.map((choice, index) => ({
          index,
          message: {
            role: "assistant",
            content: choice.text,
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            tool_calls: [],
            reasoning: null,
          },
          logprobs: null,
          finish_reason: choice.finishReason,
          stop_reason: null,
          token_ids: null,
        })),
        service_tier: null,
        system_fingerprint: null,
        usage: { ...usage(completionTokens()), prompt_tokens_details: null },
        prompt_logprobs: null,
        prompt_token_ids: null,
        kv_transfer_params: null,
      }
    : {
        id,
        object: "text_completion",
        created,
        model,
        choices: choices.map((choice, index) => ({
          index,
          text: choice.text,
          logprobs: null,
          finish_reason: choice.finishReason,
          stop_reason: null,
          token_ids: null,
          prompt_logprobs: null,
          prompt_token_ids: null,
        })),
        service_tier: null,
        system_fingerprint: null,
        usage: { ...usage(completionTokens()), prompt_tokens_details: null },
        kv_transfer_params: null,
      };
  const json = JSON.stringify(body);
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
  res.end(json);
}

/** `GET /v1/models`: one card per served name, `root` the model path. */
export function modelList(engine: SimEngine) {
  const created = Math.floor(Date.now() / 1000);
  return {
    object: "list",
    data: engine.options.servedModelNames.map((name) => ({
      id: name,
      object: "model",
      created,
      owned_by: "vllm",
      root: engine.options.model,
      parent: null,
      max_model_len: engine.options.maxModelLen,
      permission: [
        {
          id: `modelperm-${randomUUID().replaceAll("-", "")}`,
          object: "model_permission",
          created,
          allow_create_engine: false,
          allow_sampling: true,
          allow_logprobs: true,
          allow_search_indices: false,
          allow_view: true,
          allow_fine_tuning: false,
          organization: "*",
          group: null,
          is_blocking: false,
        },
      ],
    })),
  };
}
