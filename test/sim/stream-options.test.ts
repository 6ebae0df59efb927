import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { chat, post, postJson, sim, sseEvents } from "./helpers.ts";

/** The usage each chunk carries (undefined where none), and whether a final usage chunk came. */
async function usageOf(url: string, route: string, body: Record<string, unknown>) {
  const events = (await sseEvents(await post(url, route, body))).filter((e) => e !== "[DONE]");
  return {
    perChunk: events.filter((e) => e.choices.length > 0).map((e) => e.usage?.completion_tokens),
    final: events.find((e) => e.choices.length === 0)?.usage,
  };
}

describe("stream_options as vLLM's StreamOptions reads them", () => {
  test("include_usage defaults to true: stream_options {} or with only continuous_usage_stats reports usage", async () => {
    const engine = await sim();
    for (const route of ["/v1/chat/completions", "/v1/completions"]) {
      const body = (options: unknown) =>
        route === "/v1/completions"
          ? { prompt: "x", max_tokens: 2, stream: true, stream_options: options }
          : chat("x", { max_tokens: 2, stream: true, stream_options: options });
      const empty = await usageOf(engine.url, route, body({}));
      expect(empty.final, route).toMatchObject({ completion_tokens: 2 });
      expect(empty.perChunk.every((u) => u === undefined)).toBe(true);
      const continuous = await usageOf(engine.url, route, body({ continuous_usage_stats: true }));
      expect(continuous.final, route).toMatchObject({ completion_tokens: 2 });
      expect(continuous.perChunk.at(-1), route).toBe(2);
      // An explicit null is None in Python: no usage, continuous or final.
      const off = await usageOf(
        engine.url,
        route,
        body({ include_usage: null, continuous_usage_stats: true }),
      );
      expect(off).toEqual({ perChunk: off.perChunk.map(() => undefined), final: undefined });
    }
  });

  test("its booleans are read as pydantic's lax mode reads them", async () => {
    const engine = await sim();
    const yes = await usageOf(engine.url, "/v1/completions", {
      prompt: "x",
      max_tokens: 2,
      stream: true,
      stream_options: { include_usage: "true" },
    });
    expect(yes.final).toMatchObject({ completion_tokens: 2 });
    const unclear = await postJson(engine.url, "/v1/completions", {
      prompt: "x",
      stream: true,
      stream_options: { include_usage: "maybe" },
    });
    expect(unclear.status).toBe(400);
    expect(unclear.json.error).toMatchObject({
      type: "Bad Request",
      param: "body.stream_options.include_usage",
    });
    expect(unclear.json.error.message).toContain("'type': 'bool_parsing'");
  });

  test("the openai SDK's stream with stream_options {} ends with the usage chunk", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const stream = await client.chat.completions.create({
      model: "sim-model",
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 3,
      stream: true,
      stream_options: {},
    });
    let usage: OpenAI.CompletionUsage | null | undefined;
    for await (const chunk of stream) if (chunk.usage) usage = chunk.usage;
    expect(usage).toMatchObject({ completion_tokens: 3 });
  });
});
