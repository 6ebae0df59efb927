/**
 * A completion's `echo` as vLLM serves it: the prompt before the answer, its tokens in the
 * logprobs (the first with none, as vLLM's prompt logprobs), and `max_tokens: 0` asking for the
 * prompt alone, the way evaluation harnesses score a text.
 */
import OpenAI from "openai";
import { describe, expect, test } from "vitest";
import { post, sim, sseEvents } from "./helpers.ts";

const prompt = "The quiet river, at dawn";

describe("completions with echo", () => {
  test("max_tokens 0 with echo answers the prompt alone (with its logprobs), not a 400", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const answer = await client.completions.create({
      model: "sim-model",
      prompt,
      max_tokens: 0,
      echo: true,
      logprobs: 1,
    });
    const choice = answer.choices[0]!;
    expect(choice.text).toBe(prompt);
    expect(choice.finish_reason).toBe("length");
    const logprobs = choice.logprobs!;
    expect(logprobs.tokens!.join("")).toBe(prompt);
    expect(logprobs.tokens).toHaveLength(answer.usage!.prompt_tokens);
    expect(logprobs.token_logprobs![0]).toBeNull();
    expect(logprobs.top_logprobs![0]).toBeNull();
    expect(logprobs.token_logprobs!.slice(1).every((value) => typeof value === "number")).toBe(true);
    expect(logprobs.text_offset![0]).toBe(0);
    // Without echo, max_tokens 0 stays vLLM's 400.
    await expect(client.completions.create({ model: "sim-model", prompt, max_tokens: 0 })).rejects.toThrow(
      /max_tokens must be at least 1/,
    );
  });

  test("echo with logprobs covers the prompt's tokens, then the answer's, offsets running through both", async () => {
    const engine = await sim();
    const client = new OpenAI({ baseURL: `${engine.url}/v1`, apiKey: "none", maxRetries: 0 });
    const answer = await client.completions.create({
      model: "sim-model",
      prompt,
      max_tokens: 3,
      echo: true,
      logprobs: 2,
    });
    const choice = answer.choices[0]!;
    const logprobs = choice.logprobs!;
    expect(logprobs.tokens!.join("")).toBe(choice.text);
    expect(logprobs.tokens).toHaveLength(answer.usage!.prompt_tokens + 3);
    expect(logprobs.token_logprobs![0]).toBeNull();
    logprobs.tokens!.forEach((token, i) => {
      expect(choice.text.slice(logprobs.text_offset![i], logprobs.text_offset![i]! + token.length)).toBe(
        token,
      );
    });

    // Streamed: the first chunk carries the prompt and its logprobs, the text joins up the same.
    const events = (
      await sseEvents(
        await post(engine.url, "/v1/completions", {
          prompt,
          max_tokens: 3,
          echo: true,
          logprobs: 2,
          stream: true,
        }),
      )
    ).filter((event) => event !== "[DONE]");
    const streamedTokens = events.flatMap((event) => event.choices[0].logprobs.tokens);
    expect(events.map((event) => event.choices[0].text).join("")).toBe(choice.text);
    expect(streamedTokens).toEqual(logprobs.tokens);
    expect(events.flatMap((event) => event.choices[0].logprobs.text_offset)).toEqual(logprobs.text_offset);

    const only = (
      await sseEvents(
        await post(engine.url, "/v1/completions", { prompt, max_tokens: 0, echo: true, stream: true }),
      )
    ).filter((event) => event !== "[DONE]");
    expect(only.map((event) => event.choices[0].text).join("")).toBe(prompt);
    expect(only.at(-1).choices[0].finish_reason).toBe("length");
  });
});
