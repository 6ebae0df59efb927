/**
 * Tool calls: with `--enable-auto-tool-choice` and `--tool-call-parser`, vLLM answers a chat with
 * tools by calling one, so an agent client (the openai SDK's runTools, streamed or not) can be
 * tested against the simulator; the loop ends once the tool's result is sent back.
 */
import OpenAI from "openai";
import { zodFunction } from "openai/helpers/zod";
import type { ChatCompletionMessageParam, ChatCompletionTool } from "openai/resources/chat/completions";
import { describe, expect, test } from "vitest";
import { z } from "zod";
import { post, postJson, sim, sseEvents } from "./helpers.ts";

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
const withParser = { enableAutoToolChoice: true, toolCallParser: "hermes" };
const Weather = z.object({
  city: z.string(),
  unit: z.enum(["celsius", "fahrenheit"]),
  days: z.number().int(),
});
const weather: ChatCompletionTool = {
  type: "function",
  function: { name: "get_weather", parameters: z.toJSONSchema(Weather) as Record<string, unknown> },
};
const messages: ChatCompletionMessageParam[] = [{ role: "user", content: "weather in Paris?" }];

describe("tool calls", () => {
  test("auto: a call whose arguments match the schema; after its result, a text answer", async () => {
    const engine = await sim(withParser);
    const openai = client(engine.url);
    const answer = await openai.chat.completions.create({ model: "sim-model", messages, tools: [weather] });
    const choice = answer.choices[0]!;
    expect(choice.finish_reason).toBe("tool_calls");
    expect(choice.message.content).toBeNull();
    const call = choice.message.tool_calls![0]!;
    expect(call).toMatchObject({ type: "function", function: { name: "get_weather" } });
    expect(call.id).toMatch(/^chatcmpl-tool-[0-9a-f]{32}$/);
    expect(Weather.parse(JSON.parse(call.type === "function" ? call.function.arguments : ""))).toBeTruthy();
    expect(answer.usage!.completion_tokens).toBeGreaterThan(5);
    // The same request calls the same tool with the same arguments (ids are random, as vLLM's).
    const again = await openai.chat.completions.create({ model: "sim-model", messages, tools: [weather] });
    expect(again.choices[0]!.message.tool_calls).toEqual([
      { ...call, id: again.choices[0]!.message.tool_calls![0]!.id },
    ]);

    const followUp = await openai.chat.completions.create({
      model: "sim-model",
      tools: [weather],
      messages: [
        ...messages,
        choice.message,
        { role: "tool", tool_call_id: call.id, content: '{"temperature": 21}' },
      ],
    });
    expect(followUp.choices[0]!.finish_reason).toBe("stop");
    expect(followUp.choices[0]!.message.content).toBeTruthy();
    expect(followUp.choices[0]!.message.tool_calls).toBeUndefined();
  });

  test("the SDK's runTools loop, plain and streamed: it calls the tool once, then gets text", async () => {
    const engine = await sim(withParser);
    const openai = client(engine.url);
    const agent = () => {
      const calls: z.infer<typeof Weather>[] = [];
      const tool = zodFunction({
        name: "get_weather",
        parameters: Weather,
        function: (args) => {
          calls.push(args);
          return { temperature: 21 };
        },
      });
      return { calls, params: { model: "sim-model", messages, tools: [tool] } };
    };
    const plain = agent();
    const streamed = agent();
    const contents = [
      await openai.chat.completions.runTools(plain.params).finalContent(),
      await openai.chat.completions.runTools({ ...streamed.params, stream: true }).finalContent(),
    ];
    for (const [i, { calls }] of [plain, streamed].entries()) {
      expect(contents[i]).toBeTruthy();
      expect(calls).toHaveLength(1);
      expect(Weather.parse(calls[0])).toEqual(calls[0]);
    }
  });

  test("streaming: the call's opening (id, type, name) first, then argument fragments; tool_calls last", async () => {
    const engine = await sim(withParser);
    const response = await post(engine.url, "/v1/chat/completions", {
      messages,
      tools: [weather],
      stream: true,
      stop: ["}"],
    });
    const events = await sseEvents(response);
    expect(events.at(-1)).toBe("[DONE]");
    const deltas = events.slice(0, -1).map((event) => event.choices[0]);
    expect(deltas[0].delta).toEqual({ role: "assistant", content: "" });
    const opening = deltas[1].delta.tool_calls[0];
    expect(opening).toEqual({
      id: expect.stringMatching(/^chatcmpl-tool-/),
      type: "function",
      index: 0,
      function: { name: "get_weather", arguments: "" },
    });
    const fragments = deltas.slice(2).map((choice) => choice.delta.tool_calls[0]);
    for (const fragment of fragments) expect(Object.keys(fragment)).toEqual(["index", "function"]);
    // A stop string applies to text, not to a call's arguments.
    const args = fragments.map((fragment) => fragment.function.arguments).join("");
    expect(Weather.parse(JSON.parse(args))).toBeTruthy();
    expect(deltas.at(-1).finish_reason).toBe("tool_calls");
    expect(deltas.slice(0, -1).every((choice) => choice.finish_reason === null)).toBe(true);
    // The SDK's stream helper puts the deltas together.
    const final = await client(engine.url)
      .chat.completions.stream({ model: "sim-model", messages, tools: [weather] })
      .finalChatCompletion();
    const call = final.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && JSON.parse(call.function.arguments)).toEqual(JSON.parse(args));
  });

  test("max_tokens cuts the arguments, with length; the call's opening counts as a token", async () => {
    const engine = await sim(withParser);
    const cut = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      tools: [weather],
      max_tokens: 4,
    });
    expect(cut.choices[0]!.finish_reason).toBe("length");
    expect(cut.usage!.completion_tokens).toBe(4);
    const call = cut.choices[0]!.message.tool_calls![0]!;
    expect(call.type === "function" && call.function.arguments).toBe('{"city');
  });

  test("required and a named tool: a call even after a tool result; named ends with stop", async () => {
    const engine = await sim(withParser);
    const other: ChatCompletionTool = { type: "function", function: { name: "now" } };
    const afterResult: ChatCompletionMessageParam[] = [
      ...messages,
      {
        role: "assistant",
        tool_calls: [{ id: "c1", type: "function", function: { name: "now", arguments: "{}" } }],
      },
      { role: "tool", tool_call_id: "c1", content: "noon" },
    ];
    const openai = client(engine.url);
    const required = await openai.chat.completions.create({
      model: "sim-model",
      messages: afterResult,
      tools: [weather, other],
      tool_choice: "required",
    });
    expect(required.choices[0]!.finish_reason).toBe("tool_calls");
    expect(required.choices[0]!.message.content).toBe("");
    expect(required.choices[0]!.message.tool_calls).toHaveLength(1);
    const named = await openai.chat.completions.create({
      model: "sim-model",
      messages: afterResult,
      tools: [weather, other],
      tool_choice: { type: "function", function: { name: "now" } },
    });
    expect(named.choices[0]!.finish_reason).toBe("stop");
    expect(named.choices[0]!.message.content).toBe("");
    const call = named.choices[0]!.message.tool_calls![0]!;
    // A function without parameters takes an empty object.
    expect(call.type === "function" && call.function).toEqual({ name: "now", arguments: "{}" });
    // tool_choice none: text, as without a parser.
    const none = await openai.chat.completions.create({
      model: "sim-model",
      messages,
      tools: [weather],
      tool_choice: "none",
    });
    expect(none.choices[0]!.finish_reason).toBe("stop");
    expect(none.choices[0]!.message.tool_calls).toBeUndefined();
  });

  test("--tool-call-parser without --enable-auto-tool-choice makes no parser: vLLM's 400s stay", async () => {
    const engine = await sim({ toolCallParser: "hermes" });
    const body = { messages, tools: [weather] };
    const auto = await postJson(engine.url, "/v1/chat/completions", body);
    expect(auto.status).toBe(400);
    expect(auto.json.error.message).toBe(
      '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set',
    );
    const required = await postJson(engine.url, "/v1/chat/completions", { ...body, tool_choice: "required" });
    expect(required.json.error.message).toBe('tool_choice="required" requires --tool-call-parser to be set');
  });
});
