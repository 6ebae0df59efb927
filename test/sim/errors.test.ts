import { describe, expect, test } from "vitest";
import { chat, post, postJson, sim } from "./helpers.ts";

describe("bad requests get vLLM's error bodies", () => {
  test("a body that is not JSON: 400 Bad Request from the schema check", async () => {
    const engine = await sim();
    const response = await post(engine.url, "/v1/chat/completions", undefined, { body: "{nope" });
    expect(response.status).toBe(400);
    const body = (await response.json()) as any;
    expect(body.error).toMatchObject({ type: "Bad Request", code: 400 });
    expect(body.error.message).toMatch(/^1 validation error:\n.*json_invalid/s);
  });

  test("missing and mistyped fields name the parameter", async () => {
    const engine = await sim();
    const missing = await postJson(engine.url, "/v1/chat/completions", { model: "sim-model" });
    expect(missing.status).toBe(400);
    expect(missing.json.error).toMatchObject({ type: "Bad Request", param: "body.messages", code: 400 });
    expect(missing.json.error.message).toContain("Field required");

    const mistyped = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { max_tokens: "many", stream: 3 }),
    );
    expect(mistyped.status).toBe(400);
    expect(mistyped.json.error.message).toMatch(/^2 validation errors:/);
    expect(mistyped.json.error.param).toBe("body.stream");

    const notObject = await postJson(engine.url, "/v1/completions", [1, 2]);
    expect(notObject.status).toBe(400);
    expect(notObject.json.error.type).toBe("Bad Request");
  });

  test('booleans are read as pydantic\'s lax mode reads them: "true" streams; "maybe" is bool_parsing', async () => {
    const engine = await sim();
    const streamed = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify(chat("sim-model", { stream: "true", max_tokens: 2 })),
    });
    expect(streamed.headers.get("content-type")).toContain("text/event-stream");
    expect((await streamed.text()).trim().endsWith("data: [DONE]")).toBe(true);
    const unclear = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("sim-model", { stream: "maybe" }),
    );
    expect(unclear.status).toBe(400);
    expect(unclear.json.error.param).toBe("body.stream");
    expect(unclear.json.error.message).toContain("unable to interpret input");
  });

  test("values vLLM rejects while serving: 400 BadRequestError", async () => {
    const engine = await sim({ maxModelLen: 64 });
    const zero = await postJson(engine.url, "/v1/chat/completions", chat("x", { max_tokens: 0 }));
    expect(zero).toEqual({
      status: 400,
      json: {
        error: {
          message: "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
          type: "BadRequestError",
          param: "max_tokens",
          code: 400,
        },
      },
    });
    const tooLong = await postJson(engine.url, "/v1/completions", { prompt: "a b c", max_tokens: 100 });
    expect(tooLong.status).toBe(400);
    expect(tooLong.json.error).toMatchObject({ type: "BadRequestError", param: "max_tokens" });
    expect(tooLong.json.error.message).toContain("maximum context length is 64 tokens");
    const hugePrompt = await postJson(engine.url, "/v1/completions", { prompt: "word ".repeat(100) });
    expect(hugePrompt.status).toBe(400);
    expect(hugePrompt.json.error.message).toContain("your request has 100 input tokens");
    const noPrompt = await postJson(engine.url, "/v1/completions", { max_tokens: 3 });
    expect(noPrompt.status).toBe(400);
    expect(noPrompt.json.error.type).toBe("BadRequestError");
    const badN = await postJson(engine.url, "/v1/completions", { prompt: "x", n: 0 });
    expect(badN.json.error.param).toBe("n");
  });

  test("stream_options without stream is refused", async () => {
    const engine = await sim();
    const { status, json } = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { stream_options: { include_usage: true } }),
    );
    expect(status).toBe(400);
    expect(json.error.message).toContain("Stream options can only be defined when `stream=True`.");
  });

  test("an unknown model: 404 NotFoundError", async () => {
    const engine = await sim({ servedModelNames: ["qwen"] });
    expect(await postJson(engine.url, "/v1/chat/completions", chat("x", { model: "llama" }))).toEqual({
      status: 404,
      json: {
        error: {
          message: "The model `llama` does not exist.",
          type: "NotFoundError",
          param: "model",
          code: 404,
        },
      },
    });
  });
});
