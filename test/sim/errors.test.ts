import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { chat, post, postJson, sim } from "./helpers.ts";

describe("bad requests get vLLM's error bodies", () => {
  test("a body that is not JSON: 400 Bad Request from the schema check", async () => {
    const engine = await sim();
    const response = await post(engine.url, "/v1/chat/completions", undefined, {
      body: "{nope",
      headers: { "content-type": "application/json" },
    });
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
    // Pydantic lists errors in the order the request model declares its fields: max_tokens first.
    expect(mistyped.json.error.param).toBe("body.max_tokens");
    expect(mistyped.json.error.message).toContain(
      "{'type': 'int_parsing', 'loc': 'body.max_tokens', 'msg': 'Input should be a valid integer, unable to parse string as an integer', 'input': 'many'}",
    );

    const notObject = await postJson(engine.url, "/v1/completions", [1, 2]);
    expect(notObject.status).toBe(400);
    expect(notObject.json.error.type).toBe("Bad Request");
  });

  test('integers are read as pydantic\'s lax mode reads them: "3" and 3.0 are 3; 2.5 is int_from_float', async () => {
    const engine = await sim();
    for (const maxTokens of ["3", 3.0, " 3 "]) {
      const { status, json } = await postJson(engine.url, "/v1/completions", {
        prompt: "x",
        max_tokens: maxTokens,
      });
      expect(status).toBe(200);
      expect(json.usage.completion_tokens).toBe(3);
    }
    const fractional = await postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 2.5 });
    expect(fractional.status).toBe(400);
    expect(fractional.json.error).toMatchObject({ type: "Bad Request", param: "body.max_tokens" });
    expect(fractional.json.error.message).toContain("int_from_float");
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
    const noPrompt = await postJson(engine.url, "/v1/completions", { max_tokens: 3 });
    expect(noPrompt.status).toBe(400);
    expect(noPrompt.json.error).toEqual({
      message: "Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)",
      type: "BadRequestError",
      param: "prompt",
      code: 400,
    });
    const badN = await postJson(engine.url, "/v1/completions", { prompt: "x", n: 0 });
    expect(badN.json.error).toEqual({
      message: "n must be at least 1, got 0.",
      type: "BadRequestError",
      param: null,
      code: 400,
    });
  });

  test("the context, as vLLM 0.33 checks it: the output alone or the prompt alone past it is a 400; together they are served, cut with length", async () => {
    const engine = await sim({ maxModelLen: 64 });
    // 3 prompt tokens + 16 > 16: vLLM caps the output at what the context leaves (13, below any natural stop).
    const small = await sim({ maxModelLen: 16 });
    const client = new OpenAI({ baseURL: `${small.url}/v1`, apiKey: "none", maxRetries: 0 });
    const capped = await client.completions.create({ model: "sim-model", prompt: "a b c", max_tokens: 16 });
    expect(capped.choices[0]!.finish_reason).toBe("length");
    expect(capped.usage!.completion_tokens).toBe(13);
    const tooMuchOutput = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { max_completion_tokens: 65 }),
    );
    expect(tooMuchOutput).toEqual({
      status: 400,
      json: {
        error: {
          message:
            "max_completion_tokens=65 cannot be greater than max_model_len=64. Please request fewer output tokens. " +
            "(parameter=max_completion_tokens, value=65)",
          type: "BadRequestError",
          param: "max_completion_tokens",
          code: 400,
        },
      },
    });
    // A text prompt is tokenized up to one token past the context, so vLLM says "at least".
    const hugePrompt = await postJson(engine.url, "/v1/completions", { prompt: "word ".repeat(100) });
    expect(hugePrompt.json.error).toEqual({
      message:
        "This model's maximum context length is 64 tokens. However, your prompt contains at least 65 input tokens, " +
        "which exceeds this limit even without any output tokens. Please reduce the length of the input prompt. " +
        "(parameter=input_tokens, value=65)",
      type: "BadRequestError",
      param: "input_tokens",
      code: 400,
    });
    const tokenPrompt = await postJson(engine.url, "/v1/completions", { prompt: Array(70).fill(7) });
    expect(tokenPrompt.json.error.message).toContain("your prompt contains 70 input tokens");
    // A prompt that fills the context leaves no output: the sampling parameters refuse 0 tokens.
    const full = await postJson(engine.url, "/v1/completions", { prompt: Array(64).fill(7) });
    expect(full.json.error.message).toBe(
      "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)",
    );
  });

  test("tools without a tool parser, as vLLM serves a model without --tool-call-parser", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const tools = [
      { type: "function" as const, function: { name: "weather", parameters: { type: "object" } } },
    ];
    const messages = [{ role: "user" as const, content: "weather?" }];
    // Tools without a tool_choice mean "auto", which needs a parser.
    const auto = await client.chat.completions
      .create({ model: "sim-model", messages, tools })
      .catch((e) => e);
    expect(auto).toBeInstanceOf(OpenAI.BadRequestError);
    expect(auto.error).toEqual({
      message: '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
      type: "BadRequestError",
      param: null,
      code: 400,
    });
    const named = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { tools, tool_choice: { type: "function", function: { name: "weather" } } }),
    );
    expect(named.json.error.message).toBe(
      'tool_choice=function "weather" requires --tool-call-parser to be set',
    );
    const required = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { tools, tool_choice: "required" }),
    );
    expect(required.json.error.message).toBe('tool_choice="required" requires --tool-call-parser to be set');
    // tool_choice "none" leaves the tools out: an ordinary answer.
    const none = await client.chat.completions.create({
      model: "sim-model",
      messages,
      tools,
      tool_choice: "none",
    });
    expect(none.choices[0]!.message.content).toBeTruthy();
    // The request's own consistency is checked first.
    const cases: [Record<string, unknown>, string, string][] = [
      [{ tools: [] }, "tools", "`tools` must not be an empty array."],
      [{ tool_choice: "auto" }, "tool_choice", "When using `tool_choice`, `tools` must be set."],
      [{ tools, tool_choice: "sometimes" }, "tool_choice", "Invalid value for `tool_choice`: sometimes!"],
      [
        { tools, tool_choice: { type: "function", function: { name: "other" } } },
        "tool_choice",
        "The tool specified in `tool_choice` does not match any of the specified `tools`",
      ],
    ];
    for (const [fields, param, message] of cases) {
      const { status, json } = await postJson(engine.url, "/v1/chat/completions", chat("x", fields));
      expect(status).toBe(400);
      expect(json.error).toMatchObject({ type: "BadRequestError", param, code: 400 });
      expect(json.error.message).toContain(message);
    }
  });

  test("a completion's suffix (fill-in-the-middle) is refused, as vLLM's renderer refuses it without a FIM template", async () => {
    const engine = await sim();
    const refused = async (body: Record<string, unknown>) =>
      (await postJson(engine.url, "/v1/completions", { prompt: "def f(", max_tokens: 2, ...body })).json
        .error;
    expect(await refused({ suffix: "return x" })).toEqual({
      message: "suffix is only supported for models with FIM completion rendering",
      type: "BadRequestError",
      param: "suffix",
      code: 400,
    });
    expect((await refused({ suffix: "x", echo: true })).message).toBe("Echo is unsupported with suffix.");
    expect((await refused({ suffix: "x", prompt: [1, 2] })).message).toBe(
      "suffix requires text prompt input for FIM completion rendering",
    );
    // `user` is a string in vLLM's schema.
    expect((await refused({ user: 7 })).param).toBe("body.user");
  });

  test("stream_options without stream is refused, naming stream_options", async () => {
    const engine = await sim();
    const { status, json } = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { stream_options: { include_usage: true } }),
    );
    expect(status).toBe(400);
    expect(json.error).toEqual({
      message: "Stream options can only be defined when `stream=True`. (parameter=stream_options)",
      type: "BadRequestError",
      param: "stream_options",
      code: 400,
    });
  });

  test("an unknown model: 404 NotFoundError listing the served names", async () => {
    const engine = await sim({ servedModelNames: ["qwen", "q"] });
    expect(await postJson(engine.url, "/v1/chat/completions", chat("x", { model: "llama" }))).toEqual({
      status: 404,
      json: {
        error: {
          message: "The model `llama` does not exist. Valid aliases: qwen, q.",
          type: "NotFoundError",
          param: "model",
          code: 404,
        },
      },
    });
  });
});
