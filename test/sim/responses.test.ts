import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { getJson, post, postJson, sim } from "./helpers.ts";

/** `/v1/responses` as vLLM serves it without a response store, read by the openai SDK. */
const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });

describe("the Responses API", () => {
  test("a response: the SDK's output_text, usage counted, the first served name as model", async () => {
    const engine = await sim({ servedModelNames: ["qwen", "alias"] });
    const response = await client(engine.url).responses.create({
      model: "alias",
      input: "hello there",
      instructions: "Be brief.",
    });
    expect(response.id).toMatch(/^resp_/);
    expect(response).toMatchObject({ object: "response", model: "qwen", status: "completed" });
    expect(response.output_text.length).toBeGreaterThan(0);
    expect(response.output).toHaveLength(1);
    expect(response.output[0]).toMatchObject({ type: "message", role: "assistant", status: "completed" });
    expect(response.usage!.input_tokens).toBeGreaterThan(0);
    expect(response.usage!.total_tokens).toBe(response.usage!.input_tokens + response.usage!.output_tokens);
    // The same input gives the same answer, as the simulator's generations do.
    const again = await client(engine.url).responses.create({
      model: "qwen",
      input: "hello there",
      instructions: "Be brief.",
    });
    expect(again.output_text).toBe(response.output_text);
  });

  test("max_output_tokens cuts the answer: status incomplete, with the reason", async () => {
    const engine = await sim({ servedModelNames: ["qwen"] });
    const response = await client(engine.url).responses.create({
      model: "qwen",
      input: [{ role: "user", content: [{ type: "input_text", text: "hi" }] }],
      max_output_tokens: 3,
    });
    expect(response.status).toBe("incomplete");
    expect(response.incomplete_details).toEqual({ reason: "max_output_tokens" });
    expect(response.usage!.output_tokens).toBe(3);
  });

  test("a stream: named events in order, numbered, the text deltas adding up to the completed response", async () => {
    const engine = await sim({ servedModelNames: ["qwen"] });
    const stream = await client(engine.url).responses.create({ model: "qwen", input: "hi", stream: true });
    const events: { type: string; sequence_number: number; delta?: string }[] = [];
    for await (const event of stream) events.push(event as (typeof events)[number]);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 4)).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.content_part.added",
    ]);
    expect(types.slice(-4)).toEqual([
      "response.output_text.done",
      "response.content_part.done",
      "response.output_item.done",
      "response.completed",
    ]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_e, i) => i));
    const completed = events.at(-1) as unknown as { response: OpenAI.Responses.Response };
    const deltas = events.filter((e) => e.type === "response.output_text.delta").map((e) => e.delta);
    expect(deltas.length).toBe(completed.response.usage!.output_tokens);
    expect(deltas.join("")).toBe(completed.response.output_text ?? textOf(completed.response));
    // On the wire: `event:` lines, and no `[DONE]` (vLLM sends none on this route).
    const raw = await (await post(engine.url, "/v1/responses", { input: "hi", stream: true })).text();
    expect(raw).toMatch(/^event: response\.created\ndata: \{/);
    expect(raw).not.toContain("[DONE]");
  });

  test("what vLLM refuses without a response store: background, a previous response, retrieving one", async () => {
    const engine = await sim({ servedModelNames: ["qwen"] });
    const background = await postJson(engine.url, "/v1/responses", { input: "hi", background: true });
    expect(background.status).toBe(400);
    expect(background.json.error).toMatchObject({ type: "invalid_request_error", param: "background" });
    const previous = await postJson(engine.url, "/v1/responses", {
      input: "hi",
      previous_response_id: "resp_123",
    });
    expect(previous.status).toBe(404);
    expect(previous.json.error).toMatchObject({
      message: "Response with id 'resp_123' not found.",
      param: "response_id",
    });
    const retrieved = await getJson(engine.url, "/v1/responses/resp_123");
    expect(retrieved.status).toBe(404);
    const cancel = await postJson(engine.url, "/v1/responses/resp_123/cancel", {});
    expect(cancel.status).toBe(404);
    await expect(client(engine.url).responses.retrieve("resp_9")).rejects.toMatchObject({ status: 404 });
  });

  test("schema errors name the field; an unknown model is a 404", async () => {
    const engine = await sim({ servedModelNames: ["qwen"] });
    const missing = await postJson(engine.url, "/v1/responses", { model: "qwen" });
    expect(missing.status).toBe(400);
    expect(missing.json.error.param).toBe("body.input");
    const wrong = await postJson(engine.url, "/v1/responses", { input: 5 });
    expect(wrong.json.error.param).toBe("body.input");
    const tokens = await postJson(engine.url, "/v1/responses", { input: "x", max_output_tokens: "many" });
    expect(tokens.json.error.param).toBe("body.max_output_tokens");
    const none = await postJson(engine.url, "/v1/responses", { input: "x", max_output_tokens: 0 });
    expect(none.status).toBe(400);
    expect(none.json.error.param).toBe("max_tokens");
    const unknown = await postJson(engine.url, "/v1/responses", { model: "nope", input: "x" });
    expect(unknown.status).toBe(404);
  });
});

describe("the Responses API with vLLM's store (VLLM_ENABLE_RESPONSES_API_STORE=1)", () => {
  test("a response is kept for a retrieve; a later one may follow it by previous_response_id", async () => {
    const engine = await sim({ servedModelNames: ["qwen"], responsesStore: true });
    const sdk = client(engine.url);
    const made = await sdk.responses.create({ model: "qwen", input: "hi" });
    const retrieved = await sdk.responses.retrieve(made.id);
    expect(retrieved).toMatchObject({ id: made.id, status: "completed", output_text: made.output_text });
    const next = await sdk.responses.create({ model: "qwen", input: "more", previous_response_id: made.id });
    expect(next.previous_response_id).toBe(made.id);
    // Not kept when the client says so.
    const unkept = await sdk.responses.create({ model: "qwen", input: "hi", store: false });
    await expect(sdk.responses.retrieve(unkept.id)).rejects.toMatchObject({ status: 404 });
    // A stream is kept too, as its completed response.
    const stream = await sdk.responses.create({ model: "qwen", input: "hi", stream: true });
    let id = "";
    for await (const event of stream) if (event.type === "response.completed") id = event.response.id;
    expect((await sdk.responses.retrieve(id)).status).toBe("completed");
  });

  test("a background response: queued at once, completed later; one still running can be cancelled", async () => {
    // Slow tokens (×0.01 time scale: 1 s each is 10 ms), so the cancel comes while it runs.
    const engine = await sim({ servedModelNames: ["qwen"], responsesStore: true, itlMs: 1_000 });
    const sdk = client(engine.url);
    const queued = await sdk.responses.create({ model: "qwen", input: "hi", background: true });
    expect(queued.status).toBe("queued");
    let done = await sdk.responses.retrieve(queued.id);
    for (let i = 0; i < 200 && done.status === "in_progress"; i++) {
      await new Promise((resolve) => setTimeout(resolve, 10));
      done = await sdk.responses.retrieve(queued.id);
    }
    expect(done.status).toBe("completed");
    expect(done.output_text.length).toBeGreaterThan(0);
    await expect(sdk.responses.cancel(queued.id)).rejects.toMatchObject({ status: 400 });
    const running = await sdk.responses.create({
      model: "qwen",
      input: "hi",
      background: true,
      max_output_tokens: 500,
    });
    const cancelled = await sdk.responses.cancel(running.id);
    expect(cancelled.status).toBe("cancelled");
    expect((await sdk.responses.retrieve(running.id)).status).toBe("cancelled");
  });
});

function textOf(response: OpenAI.Responses.Response): string {
  return response.output
    .flatMap((item) => (item.type === "message" ? item.content : []))
    .map((part) => (part.type === "output_text" ? part.text : ""))
    .join("");
}
