import { expect, test } from "vitest";
import { UsageTap } from "./request-trace.ts";

const feed = (tap: UsageTap, text: string, size: number) => {
  for (let i = 0; i < text.length; i += size) tap.chunk(Buffer.from(text.slice(i, i + size)));
};

test("a JSON answer's usage, read once it has ended, whatever the chunking", () => {
  const tap = new UsageTap();
  tap.response("application/json");
  feed(tap, JSON.stringify({ model: "qwen", usage: { prompt_tokens: 12, completion_tokens: 7 } }), 5);
  expect(tap.usage()).toEqual({ inputTokens: 12, outputTokens: 7, responseModel: "qwen" });
});

test("an SSE stream's final usage chunk, split across chunks, after a long stream whose start is not kept", () => {
  const tap = new UsageTap();
  tap.response("text/event-stream; charset=utf-8");
  const token = `data: ${JSON.stringify({ choices: [{ delta: { content: "x".repeat(200) } }], usage: null })}\n\n`;
  const last = `data: ${JSON.stringify({ model: "qwen", choices: [], usage: { prompt_tokens: 3, completion_tokens: 900 } })}\n\ndata: [DONE]\n\n`;
  feed(tap, token.repeat(2_000) + last, 97);
  expect(tap.usage()).toEqual({ inputTokens: 3, outputTokens: 900, responseModel: "qwen" });
});

test("a streamed Responses API answer: the usage of its response.completed event, nested in `response`", () => {
  const tap = new UsageTap();
  tap.response("text/event-stream; charset=utf-8");
  const event = (type: string, data: object) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`;
  const response = { id: "resp_1", object: "response", model: "qwen", output: [] };
  const text =
    event("response.created", { response: { ...response, status: "in_progress", usage: null } }) +
    event("response.output_text.delta", { delta: "Hello" }) +
    event("response.completed", {
      response: {
        ...response,
        status: "completed",
        usage: { input_tokens: 5, output_tokens: 2, total_tokens: 7 },
      },
    });
  feed(tap, text, 64);
  expect(tap.usage()).toEqual({ inputTokens: 5, outputTokens: 2, responseModel: "qwen" });
});

test("a response.completed event larger than the tail, read in two pieces: its start is kept", () => {
  // It repeats the whole answer, the instructions and the tools' schemas: tens of KiB for an agent.
  const delta = `event: response.output_text.delta\ndata: ${JSON.stringify({ type: "response.output_text.delta", delta: "x".repeat(100) })}\n\n`;
  const completed = `event: response.completed\ndata: ${JSON.stringify({
    type: "response.completed",
    response: {
      model: "qwen",
      instructions: "y".repeat(40_000),
      usage: { input_tokens: 9, output_tokens: 400 },
    },
  })}\n\n`;
  const half = completed.length >> 1;
  // As OpenAI ends it, and with a `[DONE]` after it, as a chat stream ends.
  for (const end of ["", "data: [DONE]\n\n"]) {
    const tap = new UsageTap();
    tap.response("text/event-stream");
    feed(tap, delta.repeat(400), 4096);
    tap.chunk(Buffer.from(completed.slice(0, half)));
    tap.chunk(Buffer.from(completed.slice(half) + end));
    expect(tap.usage()).toEqual({ inputTokens: 9, outputTokens: 400, responseModel: "qwen" });
  }
});

test("no usage: a stream without include_usage, a JSON answer over 1 MiB, other content types", () => {
  const stream = new UsageTap();
  stream.response("text/event-stream");
  feed(stream, 'data: {"choices":[],"usage":null}\n\ndata: [DONE]\n\n', 10);
  expect(stream.usage()).toBeUndefined();
  const big = new UsageTap();
  big.response("application/json");
  feed(big, JSON.stringify({ pad: "x".repeat(2 ** 20), usage: { prompt_tokens: 1 } }), 65_536);
  expect(big.usage()).toBeUndefined();
  const audio = new UsageTap();
  audio.response("audio/mpeg");
  audio.chunk(Buffer.from('{"usage":{"prompt_tokens":1}}'));
  expect(audio.usage()).toBeUndefined();
});
