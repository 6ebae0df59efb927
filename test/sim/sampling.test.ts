/**
 * What a client reads back from vLLM's sampling fields: logprobs, stop strings and echo,
 * through the openai SDK as an application would ask for them.
 */
import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { chat, post, postJson, sim, sseEvents } from "./helpers.ts";

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });
const messages = [{ role: "user" as const, content: "tell me about rivers" }];

describe("sampling fields a client reads back", () => {
  test("chat logprobs: one entry per token, the token first among top_logprobs, bytes of its text", async () => {
    const engine = await sim();
    const answer = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      max_tokens: 6,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = answer.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(answer.usage!.completion_tokens);
    expect(content.map((entry) => entry.token).join("")).toBe(answer.choices[0]!.message.content);
    for (const entry of content) {
      expect(entry.logprob).toBeLessThanOrEqual(0);
      expect(entry.bytes).toEqual([...Buffer.from(entry.token)]);
      expect(entry.top_logprobs).toHaveLength(3);
      expect(entry.top_logprobs[0]).toMatchObject({ token: entry.token, logprob: entry.logprob });
      expect(entry.top_logprobs[1]!.logprob).toBeLessThan(entry.logprob);
    }
    // logprobs without top_logprobs: the tokens alone, as vLLM's default of 0.
    const plain = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      max_tokens: 2,
      logprobs: true,
    });
    expect(plain.choices[0]!.logprobs!.content![0]!.top_logprobs).toEqual([]);
    // Streaming: each token's chunk carries its logprob.
    const stream = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      max_tokens: 4,
      logprobs: true,
      stream: true,
    });
    const streamed: string[] = [];
    for await (const chunk of stream)
      for (const entry of chunk.choices[0]?.logprobs?.content ?? []) streamed.push(entry.token);
    expect(streamed).toHaveLength(4);
  });

  test("completion logprobs: tokens, token_logprobs, text_offset and logprobs + 1 candidates", async () => {
    const engine = await sim();
    const answer = await client(engine.url).completions.create({
      model: "sim-model",
      prompt: "rivers",
      max_tokens: 5,
      logprobs: 2,
    });
    const logprobs = answer.choices[0]!.logprobs!;
    expect(logprobs.tokens).toHaveLength(5);
    expect(logprobs.tokens!.join("")).toBe(answer.choices[0]!.text);
    expect(logprobs.token_logprobs).toHaveLength(5);
    expect(logprobs.text_offset![0]).toBe(0);
    expect(logprobs.text_offset![1]).toBe(logprobs.tokens![0]!.length);
    for (const top of logprobs.top_logprobs!) expect(Object.keys(top)).toHaveLength(3);
  });

  test("logprob values vLLM refuses: top_logprobs without logprobs, negative, past --max-logprobs", async () => {
    const engine = await sim();
    const cases: [string, Record<string, unknown>, string, string][] = [
      [
        "/v1/chat/completions",
        chat("x", { top_logprobs: 2 }),
        "top_logprobs",
        "when using `top_logprobs`, `logprobs` must be set to true. (parameter=top_logprobs)",
      ],
      [
        "/v1/chat/completions",
        chat("x", { logprobs: true, top_logprobs: -2 }),
        "top_logprobs",
        "`top_logprobs` must be a positive value or -1. (parameter=top_logprobs, value=-2)",
      ],
      [
        "/v1/chat/completions",
        chat("x", { logprobs: true, top_logprobs: 21 }),
        "logprobs",
        "Requested sample logprobs of 21, which is greater than max allowed: 20 (parameter=logprobs, value=21)",
      ],
      [
        "/v1/completions",
        { prompt: "x", logprobs: "3" },
        "logprobs",
        "`logprobs` must be an integer. (parameter=logprobs, value=3)",
      ],
    ];
    for (const [route, body, param, message] of cases) {
      const { status, json } = await postJson(engine.url, route, body);
      expect(status).toBe(400);
      expect(json.error).toEqual({ message, type: "BadRequestError", param, code: 400 });
    }
  });

  test("stop strings end the answer before them, with finish_reason stop and stop_reason the string", async () => {
    const engine = await sim();
    const free = await client(engine.url).completions.create({
      model: "sim-model",
      prompt: "rivers",
      max_tokens: 40,
      ignore_eos: true,
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const text = free.choices[0]!.text;
    const word = text.trim().split(/\W+/)[3]!;
    const stopped = await client(engine.url).completions.create({
      model: "sim-model",
      prompt: "rivers",
      max_tokens: 40,
      ignore_eos: true,
      stop: [word, "never-there"],
    } as OpenAI.CompletionCreateParamsNonStreaming);
    const choice = stopped.choices[0]! as OpenAI.CompletionChoice & { stop_reason: unknown };
    expect(choice.finish_reason).toBe("stop");
    expect(choice.stop_reason).toBe(word);
    expect(choice.text).toBe(text.slice(0, text.indexOf(word)));
    // Streaming sends the same text, the last chunk naming the stop string.
    const events = await sseEvents(
      await post(engine.url, "/v1/completions", {
        prompt: "rivers",
        max_tokens: 40,
        ignore_eos: true,
        stop: word,
        stream: true,
      }),
    );
    const chunks = events.filter((event) => event !== "[DONE]");
    expect(chunks.map((chunk) => chunk.choices[0].text).join("")).toBe(choice.text);
    expect(chunks.at(-1).choices[0]).toMatchObject({ finish_reason: "stop", stop_reason: word });
    // include_stop_str_in_output keeps it.
    const kept = await postJson(engine.url, "/v1/completions", {
      prompt: "rivers",
      max_tokens: 40,
      ignore_eos: true,
      stop: word,
      include_stop_str_in_output: true,
    });
    expect(kept.json.choices[0].text).toBe(text.slice(0, text.indexOf(word) + word.length));
    // A chat answer stops the same way.
    const chatStopped = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages,
      stop: ".",
    });
    expect(chatStopped.choices[0]!.message.content).not.toContain(".");
    expect(chatStopped.choices[0]!.finish_reason).toBe("stop");
  });

  test("a stream holds back the text a stop string may start, as vLLM: no chunk carries the stop string's start, the text is the same", async () => {
    const engine = await sim();
    const openai = client(engine.url);
    const ask = { model: "sim-model", messages, max_tokens: 40, ignore_eos: true, logprobs: true };
    /** Each chunk's text and the token it carries (its logprob entry), for choice 0. */
    const streamed = async (extra: Record<string, unknown>) => {
      const stream = await openai.chat.completions.create({
        ...ask,
        ...extra,
        stream: true,
      } as OpenAI.ChatCompletionCreateParamsStreaming);
      const chunks: { text: string; token: string | undefined; finish: string | null; stop: unknown }[] = [];
      for await (const chunk of stream) {
        const choice = chunk.choices[0];
        if (!choice?.logprobs) continue; // the role chunk
        chunks.push({
          text: choice.delta.content ?? "",
          token: choice.logprobs.content?.[0]?.token,
          finish: choice.finish_reason,
          stop: (choice as { stop_reason?: unknown }).stop_reason,
        });
      }
      return chunks;
    };
    const free = await streamed({});
    const whole = free.map((chunk) => chunk.text).join("");
    // A stop string that starts inside one token and ends with the next: the first token does not
    // yet tell whether it comes.
    const at = free.findIndex((chunk, i) => i >= 2 && chunk.text.length >= 3);
    const stop = free[at]!.text.slice(-2) + free[at + 1]!.text;
    const cut = whole.indexOf(stop);
    const never = "a stop string never seen";

    const chunks = await streamed({ stop: [stop, never] });
    expect(chunks.map((chunk) => chunk.text).join("")).toBe(whole.slice(0, cut));
    expect(chunks.at(-1)).toMatchObject({ finish: "stop", stop: stop });
    // Until the last chunk, the last len(longest stop) - 1 characters generated wait (vLLM's
    // stop_buffer_length), so nothing of the stop string is sent before it is known.
    let generated = "";
    let sent = "";
    for (const chunk of chunks.slice(0, -1)) {
      generated += chunk.token;
      sent += chunk.text;
      expect(sent).toBe(generated.slice(0, Math.max(0, generated.length - (never.length - 1))));
      expect(sent.length).toBeLessThanOrEqual(cut);
    }

    // With include_stop_str_in_output nothing is held: each chunk carries its token.
    const kept = await streamed({ stop: [stop], include_stop_str_in_output: true });
    expect(kept.map((chunk) => chunk.text)).toEqual(kept.map((chunk) => chunk.token));
    expect(kept.map((chunk) => chunk.text).join("")).toBe(whole.slice(0, cut + stop.length));
  });

  test("echo repeats a completion's prompt before the answer, streamed in the first chunk", async () => {
    const engine = await sim();
    const plain = await client(engine.url).completions.create({
      model: "sim-model",
      prompt: "Once upon",
      max_tokens: 3,
    });
    const echoed = await client(engine.url).completions.create({
      model: "sim-model",
      prompt: "Once upon",
      max_tokens: 3,
      echo: true,
    });
    expect(echoed.choices[0]!.text).toBe(`Once upon${plain.choices[0]!.text}`);
    expect(echoed.usage!.completion_tokens).toBe(3);
    const events = await sseEvents(
      await post(engine.url, "/v1/completions", {
        prompt: "Once upon",
        max_tokens: 3,
        echo: true,
        stream: true,
      }),
    );
    expect(events[0].choices[0].text.startsWith("Once upon")).toBe(true);
    // Chat echoes the last message when the assistant wrote it.
    const prefilled = await client(engine.url).chat.completions.create({
      model: "sim-model",
      messages: [...messages, { role: "assistant", content: "Rivers are" }],
      max_tokens: 3,
      echo: true,
    } as OpenAI.ChatCompletionCreateParamsNonStreaming);
    expect(prefilled.choices[0]!.message.content!.startsWith("Rivers are")).toBe(true);
  });
});
