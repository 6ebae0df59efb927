import { describe, expect, test } from "vitest";
import { startSim } from "../../hack/sim/server.ts";
import {
  chat,
  freePort,
  metric,
  portOpen,
  post,
  postJson,
  SseStream,
  settlesWithin,
  sim,
  track,
  waitFor,
} from "./helpers.ts";

describe("start-up", () => {
  test("the port opens only after the load time, then /health answers 200", async () => {
    const port = await freePort();
    const started = performance.now();
    const engine = track(await startSim({ port, loadTimeMs: 200, timeScale: 1 }, { waitReady: false }));
    expect(await portOpen(port)).toBe(false);
    expect(engine.engine.phase).toBe("loading");
    await engine.ready;
    expect(performance.now() - started).toBeGreaterThanOrEqual(190);
    expect((await fetch(`http://127.0.0.1:${port}/health`)).status).toBe(200);
    expect(engine.url).toBe(`http://127.0.0.1:${port}`);
  });

  test("--time-scale shrinks the load time", async () => {
    const started = performance.now();
    await sim({ loadTimeMs: 60_000, timeScale: 0.001 });
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});

describe("scheduling", () => {
  test("at most --max-num-seqs requests decode; the rest wait and run in arrival order", async () => {
    const engine = await sim({ maxNumSeqs: 2, itlMs: 1_000 });
    const long = { max_tokens: 300, ignore_eos: true, stream: true };
    const streams: SseStream[] = [];
    for (const name of ["a", "b", "c", "d"]) {
      streams.push(new SseStream(await post(engine.url, "/v1/completions", { prompt: name, ...long })));
    }
    await waitFor(
      async () =>
        (await metric(engine.url, "vllm:num_requests_running")) === 2 &&
        (await metric(engine.url, "vllm:num_requests_waiting")) === 2,
    );
    await streams[0]!.until((s) => s.tokens >= 2);
    await streams[1]!.until((s) => s.tokens >= 2);
    expect(
      await settlesWithin(
        streams[2]!.until((s) => s.events.length > 0),
        50,
      ),
    ).toBe(false);
    expect(await metric(engine.url, "vllm:kv_cache_usage_perc")).toBeGreaterThan(0);

    // Closing the first stream frees a slot for the third, not the fourth.
    await streams[0]!.cancel();
    await streams[2]!.until((s) => s.tokens >= 1);
    expect(await metric(engine.url, "vllm:num_requests_waiting")).toBe(1);
    expect(streams[3]!.events).toEqual([]);
    await waitFor(
      async () => (await metric(engine.url, "vllm:request_success_total", 'finished_reason="abort"')) === 1,
    );
  });

  test("time to first token and inter-token latency follow --ttft and --itl", async () => {
    const engine = await sim({ timeScale: 1, loadTimeMs: 0, ttftMs: 120, itlMs: 30 });
    const started = performance.now();
    const stream = new SseStream(
      await post(engine.url, "/v1/chat/completions", chat("t", { max_tokens: 6, stream: true })),
    );
    await stream.until((s) => s.tokens >= 1);
    const ttft = performance.now() - started;
    await stream.rest();
    const total = performance.now() - started;
    expect(ttft).toBeGreaterThanOrEqual(115);
    expect(total - ttft).toBeGreaterThanOrEqual(5 * 30 - 10);
    expect(await metric(engine.url, "vllm:time_to_first_token_seconds_count")).toBe(1);
    expect(await metric(engine.url, "vllm:time_to_first_token_seconds_bucket", 'le="0.1"')).toBe(0);
    expect(await metric(engine.url, "vllm:time_to_first_token_seconds_bucket", 'le="+Inf"')).toBe(1);
    expect(await metric(engine.url, "vllm:inter_token_latency_seconds_count")).toBe(5);
    // The schedule catches up after a late token, so single gaps vary; their sum keeps the rate.
    expect(await metric(engine.url, "vllm:inter_token_latency_seconds_sum")).toBeGreaterThanOrEqual(
      5 * 0.03 - 0.01,
    );
  });

  test("sub-millisecond token times keep their average rate instead of a timer's 1 ms floor", async () => {
    // 0.5 ms a token: 1,000 tokens take about 500 ms, not the 1,000+ ms a timer per token would.
    // The schedule catches up after a late timer, so a loaded machine does not add up delays.
    const engine = await sim({ timeScale: 0.1, ttftMs: 0, itlMs: 5 });
    const started = performance.now();
    const answer = await postJson(engine.url, "/v1/completions", {
      prompt: "x",
      max_tokens: 1_000,
      ignore_eos: true,
    });
    const took = performance.now() - started;
    expect(answer.json.usage.completion_tokens).toBe(1_000);
    expect(took).toBeGreaterThanOrEqual(495);
    expect(took).toBeLessThan(900);
  });

  test("metrics: vLLM's names and labels, counters move with requests", async () => {
    const engine = await sim({ servedModelNames: ["qwen", "alias"] });
    const text = await (await fetch(`${engine.url}/metrics`)).text();
    expect(text).toContain('vllm:num_requests_running{model_name="qwen",engine="0"} 0.0');
    expect(text).toContain('vllm:engine_sleep_state{model_name="qwen",engine="0",sleep_state="awake"} 1.0');
    expect(text).toContain("# TYPE vllm:request_success_total counter");
    expect(text).toContain("# TYPE vllm:time_to_first_token_seconds histogram");
    expect(text).toContain("# TYPE vllm:inter_token_latency_seconds histogram");
    await postJson(engine.url, "/v1/completions", { prompt: "a b", max_tokens: 3 });
    await postJson(engine.url, "/v1/completions", { prompt: "c", max_tokens: 200 });
    expect(await metric(engine.url, "vllm:request_success_total", 'finished_reason="length"')).toBe(1);
    expect(await metric(engine.url, "vllm:request_success_total", 'finished_reason="stop"')).toBe(1);
    expect(await metric(engine.url, "vllm:prompt_tokens_total")).toBe(3);
    expect(await metric(engine.url, "vllm:time_to_first_token_seconds_count")).toBe(2);
    expect(await metric(engine.url, "vllm:e2e_request_latency_seconds_count")).toBe(2);
  });
});
