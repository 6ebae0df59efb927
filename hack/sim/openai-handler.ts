/**
 * Serving a generation as vLLM's OpenAI server answers it: one JSON response,
 * or SSE chunks (`data: {...}\n\n`, then `data: [DONE]`) whose shapes follow
 * vLLM's serving code, including its quirks:
 * - streaming headers go out at once; the role chunk comes with the first token;
 * - the last token of a choice rides in the chunk that carries `finish_reason`;
 * - a choice aborted before its first token gets no chunk of its own;
 * - chunks carry only the fields vLLM sets (it serializes them with `exclude_unset`): no
 *   `usage` unless continuous, `token_ids` and `kv_transfer_params` as null, `stop_reason` on a
 *   chat choice only when it finishes;
 * - `system_fingerprint` on a whole answer, and on a stream's last chunk (the usage chunk when
 *   there is one);
 * - a chat message without tool calls has no `tool_calls` (vLLM's serializer drops the empty list);
 * - `stream_options.include_usage` adds a final chunk with `choices: []`;
 * - `model` in responses is the first served model name, whatever alias was asked;
 * - `echo` repeats a completion's prompt (chat: the assistant's last message) before the
 *   answer, in its first chunk when streaming (chat: a chunk of its own after the role);
 * - `stop_reason` is the stop string that ended a choice, else null.
 * - with `stop` strings, a chunk's text lags the tokens by what could start one (stop-hold.ts).
 * - a tool call (tool-call.ts) streams as OpenAI's: a first delta with the call's id, type, index
 *   and name (`arguments: ""`), then one argument fragment a token; `stop` strings do not apply to
 *   it (vLLM matches them on the model's raw markup, which the simulator has none of).
 */
import { randomUUID } from "node:crypto";
import type { IncomingMessage, ServerResponse } from "node:http";
import type { SimEngine, StepDelta } from "./engine.ts";
import { systemFingerprint } from "./fingerprint.ts";
import { planJson } from "./json-output.ts";
import { chatLogprob, completionLogprobs } from "./logprobs.ts";
import type { OpenAIRequest } from "./openai-request.ts";
import { hashString } from "./random.ts";
import { codePoints, heldBack, releasable } from "./stop-hold.ts";
import { cutAtStop } from "./stop-strings.ts";
import { planOutput } from "./text.ts";
import { splitPieces } from "./tokenizer.ts";
import { planToolCall, toolCallContent, toolCallFinishReason } from "./tool-call.ts";

interface ChoiceState {
  promptIndex: number;
  text: string;
  tokens: number;
  finishReason: string | null;
  stopReason: string | null;
  /** Each token's text, kept only when logprobs are asked for. */
  tokenTexts: string[];
  /** Characters already sent in a completion's streamed logprobs (`text_offset`). */
  streamedChars: number;
  /** Code points of `text` streamed so far; the rest is held back while a stop string may follow. */
  releasedPoints: number;
  /** The tool this choice calls (its `text` is then the call's arguments), as vLLM ids a call. */
  toolCall: { id: string; name: string } | undefined;
}

export async function serveGeneration(
  engine: SimEngine,
  request: OpenAIRequest,
  req: IncomingMessage,
  res: ServerResponse,
): Promise<void> {
  const chat = request.kind === "chat";
  // vLLM's order: the X-Request-Id header, else the body's request_id, else a fresh uuid4 in hex.
  const baseId =
    (req.headers["x-request-id"] as string | undefined) ??
    request.requestId ??
    randomUUID().replaceAll("-", "");
  const id = `${chat ? "chatcmpl" : "cmpl"}-${baseId}`;
  const created = Math.floor(Date.now() / 1000);
  const model = engine.modelName;
  const fingerprint = systemFingerprint(engine.options);
  const object = chat ? "chat.completion.chunk" : "text_completion";
  const promptTokens = request.prompts.reduce((sum, prompt) => sum + prompt.tokens, 0);
  const choices: ChoiceState[] = request.prompts.flatMap((_prompt, promptIndex) =>
    Array.from({ length: request.n }, () => ({
      promptIndex,
      text: "",
      tokens: 0,
      finishReason: null,
      stopReason: null,
      tokenTexts: [],
      streamedChars: 0,
      releasedPoints: 0,
      toolCall: undefined,
    })),
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

  const wantLogprobs = request.logprobs !== undefined;
  const held = heldBack(request.stop);
  /** What `echo` puts before a choice's answer. */
  const echoed = (choice: ChoiceState) =>
    !request.echo ? "" : chat ? (request.assistantPrefix ?? "") : request.prompts[choice.promptIndex]!.text;
  /** A completion's echoed prompt in tokens, which its logprobs list first (as vLLM's prompt logprobs). */
  const echoedPieces = (choice: ChoiceState) => {
    const text = chat ? "" : echoed(choice);
    const pieces = splitPieces(text);
    return pieces.join("") === text ? pieces : [text];
  };
  /** The answer a choice shows: none for an echo without generation. */
  const shown = (text: string) => (request.echoOnly ? "" : text);
  const toolChoice = request.toolUse?.choice ?? "auto";
  const finishReason = (choice: ChoiceState, reason: string | null) =>
    choice.toolCall && reason !== null ? toolCallFinishReason(toolChoice, reason) : reason;
  /** A streamed chunk's delta: text, or a tool call's opening (first token) or argument fragment. */
  const chatDelta = (choice: ChoiceState, text: string, position: number, hasToken: boolean) => {
    if (!choice.toolCall) return { content: text };
    if (!hasToken) return {};
    const { id, name } = choice.toolCall;
    return position === 0
      ? { tool_calls: [{ id, type: "function", index: 0, function: { name, arguments: text } }] }
      : { tool_calls: [{ index: 0, function: { arguments: text } }] };
  };
  /**
   * What a client that does not read has not been sent yet, merged per choice, as vLLM's output
   * collector merges a request's outputs while its server waits on the socket (uvicorn writes no
   * more while the transport's buffer is full; the engine decodes on). Found by an outside tester:
   * every token's chunk was queued in the process for a client that never read, without bound.
   */
  const pending = new Map<number, { tokens: string[]; text: string; finishReason: string | null }>();
  /** Tokens of each choice already sent, the position of the next one sent. */
  const sentTokens = choices.map(() => 0);
  const onStep = (deltas: StepDelta[]) => {
    for (const delta of deltas) {
      const choice = choices[delta.choice]!;
      // An abort carries no token; a token cut by a stop string may carry no text.
      if (delta.finishReason !== "abort") {
        choice.tokens += 1;
        if (wantLogprobs) choice.tokenTexts.push(delta.text);
      }
      choice.text += delta.text;
      choice.finishReason = delta.finishReason;
    }
    if (!request.stream) return;
    for (const delta of deltas) {
      const merged = pending.get(delta.choice) ?? { tokens: [], text: "", finishReason: null };
      if (delta.finishReason !== "abort") merged.tokens.push(delta.text);
      merged.text += delta.text;
      merged.finishReason = delta.finishReason;
      pending.set(delta.choice, merged);
    }
    if (!res.writableNeedDrain) sendPending();
  };
  /** Sends what waits, one chunk per choice (the role chunks first, once). */
  const sendPending = () => {
    if (pending.size === 0 || !open) return;
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
        chunk.prompt_token_ids = null;
        chunk.prompt_text = null;
        sendChunk(chunk);
      });
      const prefix = request.echo ? (request.assistantPrefix ?? "") : "";
      if (prefix !== "")
        for (let index = 0; index < choices.length; index++)
          sendChunk({
            id,
            object,
            created,
            model,
            choices: [{ index, delta: { content: prefix }, logprobs: null, finish_reason: null }],
          });
    }
    firstStep = false;
    const waiting = [...pending];
    pending.clear();
    for (const [index, merged] of waiting) sendChoice(index, merged);
  };
  /** One chunk of choice `index`: its tokens not sent yet, and its end if it came. */
  const sendChoice = (
    index: number,
    merged: { tokens: string[]; text: string; finishReason: string | null },
  ) => {
    const choice = choices[index]!;
    // vLLM skips an output without text or tokens when nothing was sent before.
    if (merged.text === "" && choice.tokens === 0) return;
    const finished = merged.finishReason !== null;
    const stopReason = finished ? choice.stopReason : null;
    const hasToken = merged.tokens.length > 0;
    const position = sentTokens[index]!;
    sentTokens[index] = position + merged.tokens.length;
    // A completion's echoed prompt, and its logprobs, ride in the choice's first chunk.
    const echoNow = !chat && position === 0 && hasToken && request.echo;
    let logprobs: unknown = null;
    if (wantLogprobs && hasToken) {
      logprobs = chat
        ? { content: merged.tokens.map((token, i) => chatLogprob(token, position + i, request.logprobs!)) }
        : completionLogprobs(
            request.echoOnly ? [] : merged.tokens,
            position,
            choice.streamedChars,
            request.logprobs!,
            echoNow ? echoedPieces(choice) : [],
          );
    }
    // The text that may begin a stop string waits for the next tokens, as in vLLM.
    const released = choice.toolCall
      ? merged.text
      : releasable(choice.text, choice.releasedPoints, held, finished);
    choice.releasedPoints += codePoints(released).length;
    const text = echoNow ? echoed(choice) + shown(released) : shown(released);
    choice.streamedChars += text.length;
    const choiceData: Record<string, unknown> = chat
      ? finished
        ? {
            index,
            delta: chatDelta(choice, released, position, hasToken),
            logprobs,
            finish_reason: finishReason(choice, merged.finishReason),
            stop_reason: stopReason,
            token_ids: null,
            weight_versions: null,
          }
        : {
            index,
            delta: chatDelta(choice, released, position, hasToken),
            logprobs,
            finish_reason: null,
            token_ids: null,
          }
      : {
          index,
          text,
          logprobs,
          finish_reason: merged.finishReason,
          stop_reason: stopReason,
          prompt_token_ids: null,
          token_ids: null,
          weight_versions: null,
        };
    const chunk: Record<string, unknown> = { id, object, created, model, choices: [choiceData] };
    if (request.continuousUsage) chunk.usage = usage(choice.tokens);
    if (finished && !request.includeUsage) chunk.system_fingerprint = fingerprint;
    chunk.kv_transfer_params = null;
    sendChunk(chunk);
  };
  res.on("drain", sendPending);

  const generation = engine.submit({
    promptTokens,
    plan: (garbage) =>
      choices.map((choice, index) => {
        const prompt = request.prompts[choice.promptIndex]!;
        const seedText = `${request.seed ?? ""}|${index % request.n}|${prompt.text}`;
        const seed = hashString(seedText, engine.options.seed);
        // Weights left garbage by a level-2 wake write "!!!", which no parser reads as a call.
        const call =
          request.toolUse && !garbage ? planToolCall(request.toolUse, seed, prompt.maxTokens) : undefined;
        if (call) {
          choice.toolCall = { id: `chatcmpl-tool-${randomUUID().replaceAll("-", "")}`, name: call.name };
          choice.stopReason = null;
          return { ...call, stopReason: null };
        }
        const planned =
          request.jsonFormat && !garbage
            ? planJson(request.jsonFormat, seed, prompt.maxTokens)
            : planOutput({
                prompt: prompt.text,
                engineSeed: engine.options.seed,
                requestSeed: request.seed,
                choiceIndex: index % request.n,
                maxTokens: prompt.maxTokens,
                minTokens: request.minTokens,
                ignoreEos: request.ignoreEos,
                garbage,
              });
        const plan = cutAtStop(planned, request.stop);
        choice.stopReason = plan.stopReason;
        return plan;
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
    // The last tokens wait with the end for a client that reads again (or goes).
    if (pending.size > 0 && res.writableNeedDrain)
      await new Promise<void>((resolve) => {
        res.once("drain", resolve);
        res.once("close", resolve);
      });
    // Gone meanwhile: nothing more is written (`write` drops it for a dead engine too).
    if (!open) return;
    sendPending();
    if (request.includeUsage)
      sendChunk({
        id,
        object,
        created,
        model,
        choices: [],
        usage: usage(completionTokens()),
        system_fingerprint: fingerprint,
      });
    write("data: [DONE]\n\n");
    res.end();
    return;
  }
  const wholeUsage = {
    ...usage(completionTokens()),
    prompt_tokens_details: null,
    completion_tokens_details: null,
  };
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
            content: choice.toolCall ? toolCallContent(toolChoice) : echoed(choice) + choice.text,
            refusal: null,
            annotations: null,
            audio: null,
            function_call: null,
            ...(choice.toolCall && {
              tool_calls: [
                {
                  id: choice.toolCall.id,
                  type: "function",
                  function: { name: choice.toolCall.name, arguments: choice.text },
                },
              ],
            }),
            reasoning: null,
          },
          logprobs: wantLogprobs
            ? { content: choice.tokenTexts.map((token, i) => chatLogprob(token, i, request.logprobs!)) }
            : null,
          finish_reason: finishReason(choice, choice.finishReason),
          stop_reason: choice.stopReason,
          token_ids: null,
          routed_experts: null,
          weight_versions: null,
        })),
        service_tier: null,
        system_fingerprint: fingerprint,
        usage: wholeUsage,
        prompt_logprobs: null,
        prompt_token_ids: null,
        prompt_text: null,
        kv_transfer_params: null,
        ec_transfer_params: null,
        metrics: null,
      }
    : {
        id,
        object: "text_completion",
        created,
        model,
        choices: choices.map((choice, index) => ({
          index,
          text: echoed(choice) + shown(choice.text),
          logprobs: wantLogprobs
            ? completionLogprobs(
                request.echoOnly ? [] : choice.tokenTexts,
                0,
                0,
                request.logprobs!,
                echoedPieces(choice),
              )
            : null,
          finish_reason: choice.finishReason,
          stop_reason: choice.stopReason,
          token_ids: null,
          prompt_logprobs: null,
          prompt_token_ids: null,
          routed_experts: null,
          weight_versions: null,
        })),
        service_tier: null,
        system_fingerprint: fingerprint,
        usage: wholeUsage,
        kv_transfer_params: null,
        ec_transfer_params: null,
        metrics: null,
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
