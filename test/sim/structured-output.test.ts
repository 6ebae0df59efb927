/**
 * `response_format`: vLLM constrains the answer to JSON, so a client parses it. The simulator
 * must answer JSON too, or every structured-output client breaks on prose.
 */
import OpenAI from "openai";
import { zodResponseFormat } from "openai/helpers/zod";
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { chat, postJson, sim } from "./helpers.ts";

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
const messages = [{ role: "user" as const, content: "describe a river" }];

describe("structured output", () => {
  test("json_schema: the SDK's parse reads an instance of the schema", async () => {
    const engine = await sim();
    const River = z.object({
      name: z.string(),
      lengthKm: z.number(),
      countries: z.array(z.string()),
      navigable: z.boolean(),
      kind: z.enum(["river", "stream"]),
      source: z.object({ lake: z.string().nullable() }),
    });
    const answer = await client(engine.url).chat.completions.parse({
      model: "sim-model",
      messages,
      response_format: zodResponseFormat(River, "river"),
    });
    const parsed = answer.choices[0]!.message.parsed!;
    expect(River.parse(parsed)).toEqual(parsed);
    expect(parsed.kind).toBe("river");
    expect(answer.choices[0]!.finish_reason).toBe("stop");
    expect(answer.usage!.completion_tokens).toBeGreaterThan(5);
  });

  test("json_object: a JSON object, for chat and completions; max_tokens can cut it, with length", async () => {
    const engine = await sim();
    const answer = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      response_format: { type: "json_object" },
    });
    const value = JSON.parse(answer.choices[0]!.message.content!);
    expect(typeof value).toBe("object");
    const completion = await postJson(engine.url, "/v1/completions", {
      prompt: "json please",
      max_tokens: 100,
      response_format: { type: "json_object" },
    });
    expect(() => JSON.parse(completion.json.choices[0].text)).not.toThrow();
    const cut = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      max_tokens: 2,
      response_format: { type: "json_object" },
    });
    expect(cut.choices[0]!.finish_reason).toBe("length");
    expect(cut.usage!.completion_tokens).toBe(2);
  });

  test("json_schema without its json_schema: vLLM's 400 naming response_format", async () => {
    const engine = await sim();
    const { status, json } = await postJson(
      engine.url,
      "/v1/chat/completions",
      chat("x", { response_format: { type: "json_schema" } }),
    );
    expect(status).toBe(400);
    expect(json.error).toEqual({
      message:
        "When response_format type is 'json_schema', the 'json_schema' field must be provided. (parameter=response_format)",
      type: "BadRequestError",
      param: "response_format",
      code: 400,
    });
  });
});
