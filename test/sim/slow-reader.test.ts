import { once } from "node:events";
import { connect } from "node:net";
import { expect, test } from "vitest";
import { metric, postJson, sim, waitFor } from "./helpers.ts";

/**
 * A client that asks for a long stream and does not read it: vLLM's server writes no more while the
 * socket's buffer is full (uvicorn waits for the transport to drain) and its engine decodes on, the
 * outputs merged until the client reads. Found by an outside tester: the simulator queued every
 * token's chunk in the process regardless, memory growing with the answer's chunks.
 */
test("a stream whose client does not read is held back, merged, and arrives whole when it reads", {
  timeout: 60_000,
}, async () => {
  const engine = await sim({ maxModelLen: 100_000, ttftMs: 0, itlMs: 1 });
  const n = 64;
  const maxTokens = 3_000;
  const body = {
    model: "sim-model",
    messages: [{ role: "user", content: "tell me everything" }],
    n,
    max_tokens: maxTokens,
    ignore_eos: true,
    seed: 7,
  };
  // The same answer, whole, to compare with.
  const whole = await postJson(engine.url, "/v1/chat/completions", body);
  expect(whole.status).toBe(200);
  const expected = (whole.json.choices as { index: number; message: { content: string } }[])
    .sort((a, b) => a.index - b.index)
    .map((choice) => choice.message.content);

  // ~64 MB of chunks, one a token: far beyond what loopback's socket buffers hold.
  const text = JSON.stringify({ ...body, stream: true, stream_options: { include_usage: true } });
  const url = new URL(engine.url);
  const socket = connect(Number(url.port), url.hostname);
  await once(socket, "connect");
  socket.pause();
  socket.write(
    `POST /v1/chat/completions HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(text)}\r\nconnection: close\r\n\r\n${text}`,
  );
  // The engine decodes it all, the client reading nothing meanwhile.
  await waitFor(
    async () =>
      (await metric(engine.url, "vllm:request_success_total", 'finished_reason="length"')) === 2 * n,
    30_000,
  );
  const chunks: Buffer[] = [];
  socket.on("data", (chunk: Buffer) => chunks.push(chunk));
  socket.resume();
  await once(socket, "end");
  const answer = Buffer.concat(chunks).toString("utf8");
  const events = answer
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice("data: ".length));
  expect(events.at(-1)).toBe("[DONE]");
  const parsed = events.slice(0, -1).map((event) => JSON.parse(event));
  const got = Array.from({ length: n }, () => "");
  for (const chunk of parsed)
    for (const choice of chunk.choices) got[choice.index] += choice.delta.content ?? "";
  // Whole and in order, every choice ended, the usage counting every token.
  expect(got).toEqual(expected);
  expect(parsed.filter((chunk) => chunk.choices[0]?.finish_reason === "length")).toHaveLength(n);
  expect(parsed.at(-1).usage.completion_tokens).toBe(n * maxTokens);
  // Merged while the client did not read: far fewer chunks than tokens (one a token before).
  expect(parsed.length).toBeLessThan((n * maxTokens) / 2);
});
