/**
 * vLLM's /tokenize and /detokenize, and the vocabulary its engine checks token-id prompts against.
 */
import { describe, expect, test } from "vitest";
import { chat, postJson, sim } from "./helpers.ts";

describe("tokenize and detokenize", () => {
  test("a prompt: its ids, count and max_model_len; the ids give the text back", async () => {
    const engine = await sim({ maxModelLen: 512 });
    const prompt = "Hello, sleepy world!  How are you?";
    const { status, json } = await postJson(engine.url, "/tokenize", { prompt, return_token_strs: true });
    expect(status).toBe(200);
    expect(Object.keys(json)).toEqual(["count", "max_model_len", "tokens", "token_strs"]);
    expect(json.max_model_len).toBe(512);
    expect(json.count).toBe(json.tokens.length);
    expect(json.token_strs.join("")).toBe(prompt);
    // The count agrees with what a completion of the same prompt reports.
    const completion = await postJson(engine.url, "/v1/completions", { prompt, max_tokens: 1 });
    expect(json.count).toBe(completion.json.usage.prompt_tokens);
    expect(await postJson(engine.url, "/detokenize", { tokens: json.tokens })).toEqual({
      status: 200,
      json: { prompt },
    });
    expect((await postJson(engine.url, "/tokenize", { prompt: "x" })).json.token_strs).toBeNull();
  });

  test("a chat counts what its chat completion's usage says", async () => {
    const engine = await sim();
    const body = chat("sim-model", { max_tokens: 1 });
    const tokenized = await postJson(engine.url, "/tokenize", { messages: body.messages });
    const answered = await postJson(engine.url, "/v1/chat/completions", body);
    expect(tokenized.json.count).toBe(answered.json.usage.prompt_tokens);
  });

  test("bad bodies: vLLM's schema errors and 404", async () => {
    const engine = await sim();
    const neither = await postJson(engine.url, "/tokenize", {});
    expect(neither.status).toBe(400);
    expect(neither.json.error.message).toMatch(/^2 validation errors:/);
    const negative = await postJson(engine.url, "/detokenize", { tokens: [1, -1] });
    expect(negative.json.error).toMatchObject({ type: "Bad Request", param: "body.tokens.1" });
    const unknown = await postJson(engine.url, "/tokenize", { model: "other", prompt: "x" });
    expect(unknown.status).toBe(404);
  });

  test("a chat's messages are checked as chat completions check them: a bad one is a 400, never a 500", async () => {
    const engine = await sim();
    for (const [messages, loc, type] of [
      [[null], "body.TokenizeChatRequest.messages.0", "dict_type"],
      [[{ role: "user", content: "hi" }, 7], "body.TokenizeChatRequest.messages.1", "dict_type"],
      [["hi"], "body.TokenizeChatRequest.messages.0", "dict_type"],
      [[{ content: "hi" }], "body.TokenizeChatRequest.messages.0.role", "missing"],
    ] as const) {
      const { status, json } = await postJson(engine.url, "/tokenize", { messages });
      expect(status, JSON.stringify(messages)).toBe(400);
      expect(json.error).toMatchObject({ type: "Bad Request", param: loc, code: 400 });
      expect(json.error.message).toContain(`'type': '${type}', 'loc': '${loc}'`);
    }
  });

  test("a completion's token ids outside the vocabulary: vLLM's 400", async () => {
    const engine = await sim();
    for (const [prompt, id] of [
      [[1, -5, 2], -5],
      [[[1], [2, 99_999_999]], 99_999_999],
    ] as const) {
      const { status, json } = await postJson(engine.url, "/v1/completions", { prompt, max_tokens: 1 });
      expect(status).toBe(400);
      expect(json.error).toEqual({
        message: `Token id ${id} is out of vocabulary`,
        type: "BadRequestError",
        param: null,
        code: 400,
      });
    }
  });
});
