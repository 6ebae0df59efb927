import { describe, expect, test } from "vitest";
import { naturalLengthRange } from "../../hack/sim/text.ts";
import { chat, getJson, post, postJson, sim, sseEvents } from "./helpers.ts";

describe("OpenAI API", () => {
  test("/v1/models lists every served name with the model path as root", async () => {
    const engine = await sim({
      model: "org/model-7b",
      servedModelNames: ["qwen", "qwen-alias"],
      maxModelLen: 2048,
    });
    const { status, json } = await getJson(engine.url, "/v1/models");
    expect(status).toBe(200);
    expect(json.object).toBe("list");
    expect(json.data.map((card: any) => card.id)).toEqual(["qwen", "qwen-alias"]);
    expect(json.data[0]).toMatchObject({
      object: "model",
      owned_by: "vllm",
      root: "org/model-7b",
      max_model_len: 2048,
    });
  });

  test("a chat completion has vLLM's shape, usage and the first served name as model", async () => {
    const engine = await sim({ servedModelNames: ["qwen", "alias"] });
    const { status, json } = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("hello there", { model: "alias", max_tokens: 5 }),
    );
    expect(status).toBe(200);
    expect(json.id).toMatch(/^chatcmpl-/);
    expect(json.object).toBe("chat.completion");
    expect(json.model).toBe("qwen");
    expect(json.choices).toHaveLength(1);
    expect(json.choices[0]).toMatchObject({
      index: 0,
      finish_reason: "length",
      logprobs: null,
      stop_reason: null,
    });
    expect(json.choices[0].message.role).toBe("assistant");
    expect(json.choices[0].message.content.length).toBeGreaterThan(0);
    expect(json.usage).toEqual({
      prompt_tokens: 9,
      total_tokens: 14,
      completion_tokens: 5,
      prompt_tokens_details: null,
      completion_tokens_details: null,
    });
    // vLLM 0.33's fields, in its order; an answer without tool calls has no tool_calls.
    expect(Object.keys(json)).toEqual([
      "id",
      "object",
      "created",
      "model",
      "choices",
      "service_tier",
      "system_fingerprint",
      "usage",
      "prompt_logprobs",
      "prompt_token_ids",
      "prompt_text",
      "kv_transfer_params",
      "ec_transfer_params",
      "metrics",
    ]);
    expect(json.system_fingerprint).toMatch(/^vllm-.+-[0-9a-f]{8}$/);
    expect(Object.keys(json.choices[0].message)).toEqual([
      "role",
      "content",
      "refusal",
      "annotations",
      "audio",
      "function_call",
      "reasoning",
    ]);
  });

  test("a request without model uses the served model, as vLLM", async () => {
    const engine = await sim({ servedModelNames: ["only"] });
    const { status, json } = await postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 2 });
    expect(status).toBe(200);
    expect(json.model).toBe("only");
    expect(json.object).toBe("text_completion");
    expect(json.choices[0]).toMatchObject({ index: 0, finish_reason: "length", logprobs: null });
    expect(json.usage).toMatchObject({ prompt_tokens: 1, completion_tokens: 2, total_tokens: 3 });
  });

  test("the same prompt and seed give the same text; another seed or prompt another text", async () => {
    const a = await sim({ seed: 1 });
    const b = await sim({ seed: 1 });
    const c = await sim({ seed: 2 });
    const text = async (url: string, prompt: string) =>
      (await postJson(url, "/v1/chat/completions", chat(prompt, { max_tokens: 12 }))).json.choices[0].message
        .content;
    const first = await text(a.url, "tell me about rivers");
    expect(await text(a.url, "tell me about rivers")).toBe(first);
    expect(await text(b.url, "tell me about rivers")).toBe(first);
    expect(await text(c.url, "tell me about rivers")).not.toBe(first);
    expect(await text(a.url, "tell me about bridges")).not.toBe(first);
    // The request's own seed counts too.
    const seeded = await postJson(
      a.url,
      "/v1/chat/completions",
      chat("tell me about rivers", { max_tokens: 12, seed: 7 }),
    );
    expect(seeded.json.choices[0].message.content).not.toBe(first);
  });

  test("without max_tokens a chat answer stops on its own at a deterministic length", async () => {
    const engine = await sim();
    const lengths = new Set<number>();
    for (const prompt of ["one", "two", "three"]) {
      const first = (await postJson(engine.url, "/v1/chat/completions", chat(prompt))).json;
      const again = (await postJson(engine.url, "/v1/chat/completions", chat(prompt))).json;
      expect(first.choices[0].finish_reason).toBe("stop");
      expect(again.choices[0].message.content).toBe(first.choices[0].message.content);
      const tokens = first.usage.completion_tokens;
      expect(tokens).toBeGreaterThanOrEqual(naturalLengthRange.min);
      expect(tokens).toBeLessThanOrEqual(naturalLengthRange.max);
      lengths.add(tokens);
    }
    expect(lengths.size).toBeGreaterThan(1);
  });

  test("a completion without max_tokens takes vLLM's default of 16 tokens, as with max_tokens null", async () => {
    const engine = await sim();
    for (const body of [{ prompt: "one" }, { prompt: "one", max_tokens: null }]) {
      const { json } = await postJson(engine.url, "/v1/completions", body);
      expect(json.choices[0].finish_reason).toBe("length");
      expect(json.usage.completion_tokens).toBe(16);
    }
  });

  test("max_tokens above the natural length stops; ignore_eos runs to max_tokens", async () => {
    const engine = await sim();
    const natural = (await postJson(engine.url, "/v1/completions", { prompt: "p", max_tokens: 500 })).json;
    expect(natural.choices[0].finish_reason).toBe("stop");
    expect(natural.usage.completion_tokens).toBeLessThanOrEqual(naturalLengthRange.max);
    const forced = (
      await postJson(engine.url, "/v1/completions", { prompt: "p", max_tokens: 100, ignore_eos: true })
    ).json;
    expect(forced.choices[0].finish_reason).toBe("length");
    expect(forced.usage.completion_tokens).toBe(100);
    const chatCapped = (
      await postJson(engine.url, "/v1/chat/completions", chat("p", { max_completion_tokens: 3 }))
    ).json;
    expect(chatCapped.usage.completion_tokens).toBe(3);
  });

  test("chat streaming: role chunk, one chunk per token, finish on the last token, usage chunk, [DONE]", async () => {
    const engine = await sim();
    const response = await post(
      engine.url,
      "/v1/chat/completions",
      chat("stream please", { max_tokens: 4, stream: true, stream_options: { include_usage: true } }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toBe("text/event-stream; charset=utf-8");
    const events = await sseEvents(response);
    expect(events.at(-1)).toBe("[DONE]");
    const chunks = events.slice(0, -1);
    expect(chunks).toHaveLength(1 + 4 + 1);
    const id = chunks[0].id;
    for (const chunk of chunks) {
      expect(chunk).toMatchObject({ id, object: "chat.completion.chunk", model: "sim-model" });
      expect(typeof chunk.created).toBe("number");
    }
    expect(chunks[0].choices).toEqual([
      { index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null },
    ]);
    expect(chunks[0]).not.toHaveProperty("usage");
    for (const chunk of chunks.slice(1, 4)) {
      expect(chunk.choices[0]).toEqual({
        index: 0,
        delta: { content: expect.any(String) },
        logprobs: null,
        finish_reason: null,
        token_ids: null,
      });
      expect(chunk.kv_transfer_params).toBeNull();
    }
    expect(chunks[4].choices[0]).toMatchObject({ finish_reason: "length", stop_reason: null });
    // With a usage chunk to come, the fingerprint waits for it.
    expect(chunks[4]).not.toHaveProperty("system_fingerprint");
    expect(chunks[4].choices[0].delta.content.length).toBeGreaterThan(0);
    expect(chunks[5]).toEqual({
      id,
      object: "chat.completion.chunk",
      created: chunks[0].created,
      model: "sim-model",
      choices: [],
      usage: { prompt_tokens: 9, total_tokens: 13, completion_tokens: 4 },
      system_fingerprint: expect.stringMatching(/^vllm-/),
    });
    // The streamed text is the text a non-streaming request gets.
    const text = chunks
      .slice(1, 5)
      .map((chunk) => chunk.choices[0].delta.content)
      .join("");
    const whole = (
      await postJson(engine.url, "/v1/chat/completions", chat("stream please", { max_tokens: 4 }))
    ).json;
    expect(text).toBe(whole.choices[0].message.content);
  });

  test("chat streaming without include_usage has no usage chunk", async () => {
    const engine = await sim();
    const events = await sseEvents(
      await post(engine.url, "/v1/chat/completions", chat("x", { max_tokens: 2, stream: true })),
    );
    expect(events).toHaveLength(1 + 2 + 1);
    expect(events.slice(0, -1).every((chunk) => chunk.choices.length === 1 && !("usage" in chunk))).toBe(
      true,
    );
    // Without a usage chunk the last one carries the fingerprint.
    expect(events.at(-2).system_fingerprint).toMatch(/^vllm-/);
    expect(events[1]).not.toHaveProperty("system_fingerprint");
  });

  test("continuous_usage_stats puts running usage on every chunk", async () => {
    const engine = await sim();
    const events = await sseEvents(
      await post(
        engine.url,
        "/v1/chat/completions",
        chat("x", {
          max_tokens: 3,
          stream: true,
          stream_options: { include_usage: true, continuous_usage_stats: true },
        }),
      ),
    );
    const usage = events.slice(0, -1).map((chunk) => chunk.usage.completion_tokens);
    expect(usage).toEqual([0, 1, 2, 3, 3]);
  });

  test("completion streaming: text chunks as vLLM 0.33 sets them (no usage), then usage and [DONE]", async () => {
    const engine = await sim();
    const events = await sseEvents(
      await post(engine.url, "/v1/completions", {
        prompt: "once upon",
        max_tokens: 3,
        stream: true,
        stream_options: { include_usage: true },
      }),
    );
    expect(events).toHaveLength(3 + 1 + 1);
    for (const chunk of events.slice(0, 3)) {
      expect(chunk).toMatchObject({ object: "text_completion" });
      expect(chunk).not.toHaveProperty("usage");
      expect(chunk.id).toMatch(/^cmpl-/);
      expect(Object.keys(chunk.choices[0])).toEqual([
        "index",
        "text",
        "logprobs",
        "finish_reason",
        "stop_reason",
        "prompt_token_ids",
        "token_ids",
        "weight_versions",
      ]);
    }
    expect(events.slice(0, 3).map((chunk) => chunk.choices[0].finish_reason)).toEqual([null, null, "length"]);
    expect(events[3]).toMatchObject({
      choices: [],
      usage: { prompt_tokens: 2, completion_tokens: 3, total_tokens: 5 },
    });
    expect(events[4]).toBe("[DONE]");
  });

  test("n choices and batched completion prompts each get their own index and text", async () => {
    const engine = await sim();
    const chatN = (await postJson(engine.url, "/v1/chat/completions", chat("x", { n: 2, max_tokens: 4 })))
      .json;
    expect(chatN.choices.map((choice: any) => choice.index)).toEqual([0, 1]);
    expect(chatN.choices[0].message.content).not.toBe(chatN.choices[1].message.content);
    expect(chatN.usage.completion_tokens).toBe(8);
    const batch = (await postJson(engine.url, "/v1/completions", { prompt: ["a b", "c d e"], max_tokens: 2 }))
      .json;
    expect(batch.choices.map((choice: any) => choice.index)).toEqual([0, 1]);
    expect(batch.usage.prompt_tokens).toBe(5);
    const tokens = (await postJson(engine.url, "/v1/completions", { prompt: [1, 2, 3, 4], max_tokens: 1 }))
      .json;
    expect(tokens.usage.prompt_tokens).toBe(4);
  });

  test("an X-Request-Id header names the response", async () => {
    const engine = await sim();
    const response = await post(engine.url, "/v1/chat/completions", chat("x", { max_tokens: 1 }), {
      headers: { "content-type": "application/json", "x-request-id": "abc123" },
    });
    expect(((await response.json()) as any).id).toBe("chatcmpl-abc123");
  });

  test("--enable-request-id-headers: every answer carries X-Request-Id, the request's own or a fresh one", async () => {
    const off = await sim();
    expect((await fetch(`${off.url}/health`)).headers.get("x-request-id")).toBeNull();
    const engine = await sim({ requestIdHeaders: true });
    const own = await post(engine.url, "/v1/chat/completions", chat("x", { max_tokens: 1 }), {
      headers: { "content-type": "application/json", "x-request-id": "abc123" },
    });
    expect(own.headers.get("x-request-id")).toBe("abc123");
    const streamed = await post(
      engine.url,
      "/v1/chat/completions",
      chat("x", { max_tokens: 1, stream: true }),
    );
    expect(streamed.headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
    await streamed.text();
    expect((await fetch(`${engine.url}/health`)).headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
  });

  test("/health, /ping and /version answer; unknown routes answer FastAPI's 404", async () => {
    const engine = await sim();
    const health = await fetch(`${engine.url}/health`);
    expect(health.status).toBe(200);
    expect(await health.text()).toBe("");
    expect((await fetch(`${engine.url}/ping`)).status).toBe(200);
    expect((await getJson(engine.url, "/version")).json.version).toMatch(/^\d+\.\d+\.\d+/);
    expect(await getJson(engine.url, "/v2/nothing")).toEqual({ status: 404, json: { detail: "Not Found" } });
    expect(await getJson(engine.url, "/v1/chat/completions")).toEqual({
      status: 405,
      json: { detail: "Method Not Allowed" },
    });
  });

  test("/load: 0 as vLLM says without --enable-server-load-tracking; with it, inference requests in flight", async () => {
    const plain = await sim();
    expect(await getJson(plain.url, "/load")).toEqual({ status: 200, json: { server_load: 0 } });
    const engine = await sim({ enableServerLoadTracking: true, timeScale: 1, ttftMs: 10_000 });
    const controller = new AbortController();
    const pending = post(engine.url, "/v1/chat/completions", chat("x", { max_tokens: 1, stream: true }), {
      signal: controller.signal,
    });
    const response = await pending;
    expect(response.status).toBe(200);
    expect((await getJson(engine.url, "/load")).json).toEqual({ server_load: 1 });
    controller.abort();
    await response.body?.cancel().catch(() => {});
    await expect.poll(async () => (await getJson(engine.url, "/load")).json.server_load).toBe(0);
  });
});
