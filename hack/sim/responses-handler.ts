/**
 * Serving `/v1/responses` as vLLM does for a model without a reasoning or tool parser: one
 * `response` object, or named SSE events (`event: <type>\ndata: {...}\n\n`, numbered by
 * `sequence_number`, no `[DONE]`): `response.created` and `response.in_progress` at once, the
 * message item and its text part opened with the first token, a `response.output_text.delta` per
 * token, then the text, part and item closed and `response.completed` with the whole response. An
 * answer cut by `max_output_tokens` is `incomplete`. With a store (`ResponseStore`) a response is
 * kept for a retrieve, and a `background` one is answered `queued` at once and generated after.
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Generation, SimEngine, StepDelta } from "./engine.ts";
import type { ResponseStore } from "./response-store.ts";
import { type ResponsesRequest, responseNotFound, responsesError } from "./responses-request.ts";
import { planOutput } from "./text.ts";

const hex = () => randomUUID().replaceAll("-", "");

type Status = "queued" | "in_progress" | "completed" | "incomplete" | "cancelled";
type Emit = (type: string, fields: Record<string, unknown>) => void;

/** One response's generation: its deltas as events (for a stream), its state as a response object. */
class ResponseRun {
  readonly id: string;
  private readonly engine: SimEngine;
  private readonly request: ResponsesRequest;
  private readonly emit: Emit;
  private readonly itemId = `msg_${hex()}`;
  private readonly createdAt = Math.floor(Date.now() / 1000);
  private text = "";
  private tokens = 0;
  private finishReason: string | null = null;
  readonly generation: Generation;

  constructor(engine: SimEngine, request: ResponsesRequest, id: string, emit: Emit) {
    this.id = id;
    this.engine = engine;
    this.request = request;
    this.emit = emit;
    this.generation = engine.submit({
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
      onStep: (deltas) => this.step(deltas),
    });
  }

  /** How the generation ended: cut by `max_output_tokens`, or whole. */
  get ended(): "completed" | "incomplete" {
    return this.finishReason === "length" ? "incomplete" : "completed";
  }

  response(status: Status): Record<string, unknown> {
    const { request } = this;
    const done = status === "completed" || status === "incomplete";
    return {
      id: this.id,
      created_at: this.createdAt,
      incomplete_details: status === "incomplete" ? { reason: "max_output_tokens" } : null,
      instructions: request.instructions,
      metadata: null,
      model: this.engine.modelName,
      object: "response",
      output: done ? [this.message("completed")] : [],
      parallel_tool_calls: true,
      temperature: request.temperature,
      tool_choice: "auto",
      tools: [],
      top_p: request.topP,
      background: request.background,
      max_output_tokens: request.maxOutputTokens ?? request.maxTokens,
      max_tool_calls: null,
      previous_response_id: request.previousResponseId ?? null,
      prompt: null,
      reasoning: null,
      service_tier: "auto",
      status,
      text: null,
      top_logprobs: null,
      truncation: "disabled",
      usage: done
        ? {
            input_tokens: request.prompt.tokens,
            input_tokens_details: { cached_tokens: 0 },
            output_tokens: this.tokens,
            output_tokens_details: { reasoning_tokens: 0 },
            total_tokens: request.prompt.tokens + this.tokens,
          }
        : null,
      user: null,
    };
  }

  /** The closing events of a stream, through `response.completed`. */
  close(): void {
    const inPart = { content_index: 0, item_id: this.itemId, output_index: 0 };
    if (this.tokens > 0) {
      this.emit("response.output_text.done", { ...inPart, logprobs: [], text: this.text });
      this.emit("response.content_part.done", { ...inPart, part: this.part(true) });
      this.emit("response.output_item.done", { item: this.message("completed"), output_index: 0 });
    }
    this.emit("response.completed", { response: this.response(this.ended) });
  }

  private step(deltas: StepDelta[]): void {
    const inPart = { content_index: 0, item_id: this.itemId, output_index: 0 };
    for (const delta of deltas) {
      this.finishReason = delta.finishReason;
      if (delta.text === "") continue;
      if (this.tokens === 0) {
        this.emit("response.output_item.added", { item: this.message("in_progress"), output_index: 0 });
        this.emit("response.content_part.added", { ...inPart, part: this.part(false) });
      }
      this.tokens += 1;
      this.text += delta.text;
      this.emit("response.output_text.delta", { ...inPart, delta: delta.text, logprobs: [] });
    }
  }

  private part(done: boolean) {
    return { annotations: [], text: done ? this.text : "", type: "output_text", logprobs: done ? null : [] };
  }

  private message(status: "in_progress" | "completed") {
    return {
      id: this.itemId,
      content: status === "completed" ? [this.part(true)] : [],
      role: "assistant",
      status,
      type: "message",
    };
  }
}

export async function serveResponse(
  engine: SimEngine,
  request: ResponsesRequest,
  req: IncomingMessage,
  res: ServerResponse,
  store: ResponseStore | undefined,
): Promise<void> {
  if (request.previousResponseId && !store?.get(request.previousResponseId))
    throw responseNotFound(request.previousResponseId);
  const id = `resp_${(req.headers["x-request-id"] as string | undefined) ?? hex()}`;
  if (request.background && store) return serveInBackground(engine, request, id, res, store);

  let open = true;
  res.on("error", () => {});
  let sequence = 0;
  const write = (type: string, fields: Record<string, unknown>) =>
    res.write(
      `event: ${type}\ndata: ${JSON.stringify({ ...fields, sequence_number: sequence++, type })}\n\n`,
    );
  /**
   * Events a client that does not read has not been sent: a run of text deltas merged into one, as
   * vLLM merges a request's outputs while its server waits on the socket (see openai-handler.ts).
   */
  const waiting: { type: string; fields: Record<string, unknown> }[] = [];
  const sendWaiting = () => {
    for (const event of waiting.splice(0))
      if (open && engine.phase !== "dead") write(event.type, event.fields);
  };
  const emit: Emit = (type, fields) => {
    if (!request.stream || !open || engine.phase === "dead") return;
    if (waiting.length === 0 && !res.writableNeedDrain) {
      write(type, fields);
      return;
    }
    const last = waiting.at(-1);
    if (type === "response.output_text.delta" && last?.type === type)
      last.fields = { ...last.fields, delta: `${last.fields.delta}${fields.delta}` };
    else waiting.push({ type, fields });
  };
  res.on("drain", sendWaiting);
  if (request.stream) {
    res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
    res.flushHeaders();
  }
  const run = new ResponseRun(engine, request, id, emit);
  emit("response.created", { response: run.response("in_progress") });
  emit("response.in_progress", { response: run.response("in_progress") });
  res.on("close", () => {
    open = false;
    if (!res.writableFinished) run.generation.cancel();
  });
  res.on("finish", () => engine.requestCompleted());

  await run.generation.done;
  if (!open || engine.phase === "dead") return;
  if (request.store) store?.put(id, { response: run.response(run.ended) });
  if (request.stream) {
    run.close();
    // The last events wait for a client that reads again (or goes).
    if (waiting.length > 0 && res.writableNeedDrain)
      await new Promise<void>((resolve) => {
        res.once("drain", resolve);
        res.once("close", resolve);
      });
    sendWaiting();
    res.end();
    return;
  }
  const json = JSON.stringify(run.response(run.ended));
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) });
  res.end(json);
}

/** A background response: answered `queued` now, kept as it moves, cancelled on request. */
function serveInBackground(
  engine: SimEngine,
  request: ResponsesRequest,
  id: string,
  res: ServerResponse,
  store: ResponseStore,
): void {
  const run = new ResponseRun(engine, request, id, () => {});
  const entry = {
    response: run.response("queued"),
    cancel: () => run.generation.cancel(),
  };
  store.put(id, entry);
  const answer = JSON.stringify(entry.response);
  entry.response = run.response("in_progress");
  void run.generation.done.then(
    () => {
      engine.requestCompleted();
      if (entry.response.status !== "cancelled") store.put(id, { response: run.response(run.ended) });
    },
    () => {},
  );
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(answer) });
  res.end(answer);
}

/** `GET /v1/responses/{id}`: the stored response as it is now. */
export function retrieveResponse(store: ResponseStore | undefined, id: string, query: URLSearchParams) {
  const entry = store?.get(id);
  if (!entry) throw responseNotFound(id);
  // vLLM streams again only what a background stream recorded, which the simulator has none of.
  if (query.get("stream") === "true") throw responsesError(400, `Unknown response_id: ${id}`, "response_id");
  return entry.response;
}

/** `POST /v1/responses/{id}/cancel`: a background response still running stops, `cancelled`. */
export function cancelResponse(store: ResponseStore | undefined, id: string) {
  const entry = store?.get(id);
  if (!entry) throw responseNotFound(id);
  const status = entry.response.status;
  if ((status !== "queued" && status !== "in_progress") || !entry.cancel)
    throw responsesError(400, "Cannot cancel a synchronous response.", "response_id");
  entry.response = { ...entry.response, status: "cancelled" };
  entry.cancel();
  return entry.response;
}
