/**
 * Serving `/v1/responses` as vLLM does for a model without a reasoning or tool parser: one
 * `response` object, or named SSE events (`event: <type>\ndata: {...}\n\n`, numbered by
 * `sequence_number`, no `[DONE]`): `response.created` and `response.in_progress` at once, the
 * message item and its text part opened with the first token, a `response.output_text.delta` per
 * token, then the text, part and item closed and `response.completed` with the whole response. An
 * answer cut by `max_output_tokens` is `incomplete`.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SimEngine, StepDelta } from "./engine.ts";
import type { ResponsesRequest } from "./responses-request.ts";
import { planOutput } from "./text.ts";

const hex = () => randomUUID().replaceAll("-", "");

export async function serveResponse(
  engine: SimEngine,
  request: ResponsesRequest,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const id = `resp_${(req.headers["x-request-id"] as string | undefined) ?? hex()}`;
  const itemId = `msg_${hex()}`;
  const createdAt = Math.floor(Date.now() / 1000);
  let text = "";
  let tokens = 0;
  let finishReason: string | null = null;

  const response = (status: "in_progress" | "completed" | "incomplete") => ({
    id,
    created_at: createdAt,
    incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
    instructions: request.instructions,
    metadata: null,
    model: engine.modelName,
    object: "response",
    output: status === "in_progress" ? [] : [message("completed")],
    parallel_tool_calls: true,
    temperature: request.temperature,
    tool_choice: "auto",
    tools: [],
    top_p: request.topP,
    background: false,
    max_output_tokens: request.maxOutputTokens ?? request.maxTokens,
    max_tool_calls: null,
    previous_response_id: null,
    prompt: null,
    reasoning: null,
    service_tier: "auto",
    status,
    text: null,
    top_logprobs: null,
    truncation: "disabled",
    usage:
      status === "in_progress"
        ? null
        : {
            input_tokens: request.prompt.tokens,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: tokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: request.prompt.tokens + tokens,
          },
    user: null,
  });
  const part = (done: boolean) => ({
    annotations: [],
    text: done ? text : "",
    type: "output_text",
    logprobs: done ? null : [],
  });
  const message = (status: "in_progress" | "completed") => ({
    id: itemId,
    content: status === "completed" ? [part(true)] : [],
    role: "assistant",
    status,
    type: "message",
  });

  let open = true;
  res.on("error", () => {});
  let sequence = 0;
  const event = (type: string, fields: Record<string, unknown>) => {
    if (!open || engine.phase === "dead") return;
    res.write(
      `event: ${type}\ndata: ${JSON.stringify({ ...fields, sequence_number: sequence++, type })}\n\n`,
    );
  };
  const inItem = { item_id: itemId, output_index: 0 };
  const inPart = { content_index: 0, ...inItem };

  if (request.stream) {
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.flushHeaders();
    event("response.created", { response: response("in_progress") });
    event("response.in_progress", { response: response("in_progress") });
  }
  const onStep = (deltas: StepDelta[]) => {
    for (const delta of deltas) {
      finishReason = delta.finishReason;
      if (delta.text === "") continue;
      if (request.stream && tokens === 0) {
        event("response.output_item.added", { item: message("in_progress"), output_index: 0 });
        event("response.content_part.added", { ...inPart, part: part(false) });
      }
      tokens += 1;
      text += delta.text;
      if (request.stream) event("response.output_text.delta", { ...inPart, delta: delta.text, logprobs: [] });
    }
  };
  const generation = engine.submit({
    promptTokens: request.prompt.tokens,
    plan: (garbage) => [
      planOutput({
        prompt: request.prompt.text,
        engineSeed: engine.options.seed,
        requestSeed: request.seed,
        choiceIndex: 0,
        maxTokens: request.maxTokens,
        garbage,
      }),
    ],
    onStep,
  });
  res.on("close", () => {
    open = false;
    if (!res.writableFinished) generation.cancel();
  });
  res.on("finish", () => engine.requestCompleted());

  await generation.done;
  if (!open || engine.phase === "dead") return;
  const status = finishReason === "length" ? "incomplete" : "completed";
  if (request.stream) {
    if (tokens > 0) {
      event("response.output_text.done", { ...inPart, logprobs: [], text });
      event("response.content_part.done", { ...inPart, part: part(true) });
      event("response.output_item.done", { item: message("completed"), output_index: 0 });
    }
    event("response.completed", { response: response(status) });
    res.end();
    return;
  }
  const json = JSON.stringify(response(status));
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
  res.end(json);
}
