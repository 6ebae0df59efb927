import { describe, expect, test } from "vitest";
import { chat, getJson, metric, post, postJson, SseStream, settlesWithin, sim, waitFor } from "./helpers.ts";

const awake = 'sleep_state="awake"';
const offloaded = 'sleep_state="weights_offloaded"';
const discarded = 'sleep_state="discard_all"';

async function sleepState(url: string) {
  return [
    await metric(url, "vllm:engine_sleep_state", awake),
    await metric(url, "vllm:engine_sleep_state", offloaded),
    await metric(url, "vllm:engine_sleep_state", discarded),
  ];
}

async function isSleeping(url: string): Promise<boolean> {
  const { status, json } = await getJson(url, "/is_sleeping");
  expect(status).toBe(200);
  return json.is_sleeping;
}

/** A long answer at 10 ms a token (with the tests' ×0.01 time scale). */
const slowTokens = { itlMs: 1_000 };

describe("sleep endpoints exist only with VLLM_SERVER_DEV_MODE=1 and --enable-sleep-mode", () => {
  test("without dev mode: every development endpoint is 404", async () => {
    const engine = await sim({ devMode: false, enableSleepMode: true });
    for (const [method, path] of [
      ["POST", "/sleep"],
      ["POST", "/wake_up"],
      ["GET", "/is_sleeping"],
      ["POST", "/collective_rpc"],
      ["POST", "/reset_prefix_cache"],
    ] as const) {
      const response = await fetch(`${engine.url}${path}`, { method });
      expect([path, response.status, await response.json()]).toEqual([path, 404, { detail: "Not Found" }]);
    }
  });

  test("dev mode without --enable-sleep-mode: no sleep endpoints, the others work", async () => {
    const engine = await sim({ devMode: true, enableSleepMode: false });
    expect((await post(engine.url, "/sleep")).status).toBe(404);
    expect((await post(engine.url, "/wake_up")).status).toBe(404);
    expect((await fetch(`${engine.url}/is_sleeping`)).status).toBe(404);
    expect(await postJson(engine.url, "/collective_rpc", { method: "reload_weights" })).toEqual({
      status: 200,
      json: { results: [null] },
    });
    expect(await postJson(engine.url, "/reset_prefix_cache")).toEqual({
      status: 200,
      json: { success: true },
    });
  });

  test("cache resets as vLLM 0.33's: a prefix-cache reset fails while requests run, unless told to reset those", async () => {
    const engine = await sim({ devMode: true, timeScale: 1, ttftMs: 10_000 });
    const controller = new AbortController();
    const running = await post(
      engine.url,
      "/v1/chat/completions",
      chat("x", { max_tokens: 1, stream: true }),
      {
        signal: controller.signal,
      },
    );
    await expect.poll(() => engine.engine.gauges().running).toBe(1);
    expect((await postJson(engine.url, "/reset_prefix_cache")).json).toEqual({ success: false });
    expect((await postJson(engine.url, "/reset_prefix_cache?reset_running_requests=true")).json).toEqual({
      success: true,
    });
    controller.abort();
    await running.body?.cancel().catch(() => {});
    for (const path of ["/reset_mm_cache", "/reset_encoder_cache"]) {
      const response = await post(engine.url, path);
      expect([response.status, await response.text()]).toEqual([200, ""]);
    }
    expect((await postJson(engine.url, "/collective_rpc", ["reload_weights"])).json).toEqual({
      error: { message: "Request body must be a JSON object", type: "Bad Request", param: null, code: 400 },
    });
  });

  test("the process environment decides dev mode by default", async () => {
    const previous = process.env.VLLM_SERVER_DEV_MODE;
    try {
      process.env.VLLM_SERVER_DEV_MODE = "1";
      const on = await sim({ devMode: undefined });
      expect((await fetch(`${on.url}/is_sleeping`)).status).toBe(200);
      delete process.env.VLLM_SERVER_DEV_MODE;
      const off = await sim({ devMode: undefined });
      expect((await fetch(`${off.url}/is_sleeping`)).status).toBe(404);
    } finally {
      if (previous === undefined) delete process.env.VLLM_SERVER_DEV_MODE;
      else process.env.VLLM_SERVER_DEV_MODE = previous;
    }
  });
});

describe("sleep levels", () => {
  test("level 1: asleep, /health still 200, metrics flip, a request is parked until the wake", async () => {
    const engine = await sim();
    expect(await isSleeping(engine.url)).toBe(false);
    expect(await sleepState(engine.url)).toEqual([1, 0, 0]);

    const slept = await post(engine.url, "/sleep?level=1");
    expect(slept.status).toBe(200);
    expect(await slept.json()).toEqual({ status: "sleeping", level: 1 });
    expect(await isSleeping(engine.url)).toBe(true);
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    expect((await getJson(engine.url, "/v1/models")).status).toBe(200);
    expect(await sleepState(engine.url)).toEqual([0, 1, 0]);
    expect(await metric(engine.url, "vllm:kv_cache_usage_perc")).toBe(0);

    const parked = postJson(engine.url, "/v1/chat/completions", chat("are you there?", { max_tokens: 3 }));
    await waitFor(async () => (await metric(engine.url, "vllm:num_requests_waiting")) === 1);
    expect(await settlesWithin(parked, 50)).toBe(false);
    // A streaming request gets its 200 and headers at once, then nothing until the wake.
    const stream = await post(
      engine.url,
      "/v1/chat/completions",
      chat("stream?", { max_tokens: 2, stream: true }),
    );
    expect(stream.status).toBe(200);
    const streamed = new SseStream(stream);
    expect(
      await settlesWithin(
        streamed.until((s) => s.events.length > 0),
        50,
      ),
    ).toBe(false);

    const woke = await post(engine.url, "/wake_up");
    expect(woke.status).toBe(200);
    expect(await woke.json()).toEqual({ status: "awake", tags: null });
    const answer = await parked;
    expect(answer.status).toBe(200);
    expect(answer.json.choices[0].finish_reason).toBe("length");
    expect((await streamed.rest()).at(-1)).toBe("[DONE]");
    expect(await isSleeping(engine.url)).toBe(false);
    expect(await sleepState(engine.url)).toEqual([1, 0, 0]);
    expect(await metric(engine.url, "vllm:num_requests_waiting")).toBe(0);
  });

  test("level 2: wake the weights, reload them, wake the KV cache", async () => {
    const engine = await sim();
    const normal = (await postJson(engine.url, "/v1/completions", { prompt: "hello", max_tokens: 4 })).json
      .choices[0].text;
    expect((await post(engine.url, "/sleep?level=2")).status).toBe(200);
    expect(await sleepState(engine.url)).toEqual([0, 0, 1]);

    const parked = postJson(engine.url, "/v1/completions", { prompt: "hello", max_tokens: 4 });
    expect((await post(engine.url, "/wake_up?tags=weights")).status).toBe(200);
    expect(await isSleeping(engine.url)).toBe(true);
    // vLLM's metric already says awake after any wake_up call; /is_sleeping is the truth.
    expect(await sleepState(engine.url)).toEqual([1, 0, 0]);
    expect(await settlesWithin(parked, 50)).toBe(false);

    expect(await postJson(engine.url, "/collective_rpc", { method: "reload_weights" })).toEqual({
      status: 200,
      json: { results: [null] },
    });
    expect(await isSleeping(engine.url)).toBe(true);
    expect((await post(engine.url, "/wake_up?tags=kv_cache")).status).toBe(200);
    expect(await isSleeping(engine.url)).toBe(false);
    expect((await parked).json.choices[0].text).toBe(normal);
  });

  test("level 2 woken without reload_weights answers garbage until the weights are reloaded", async () => {
    const engine = await sim();
    const normal = (await postJson(engine.url, "/v1/completions", { prompt: "hi", max_tokens: 4 })).json
      .choices[0].text;
    await post(engine.url, "/sleep?level=2");
    await post(engine.url, "/wake_up");
    expect(await isSleeping(engine.url)).toBe(false);
    expect(
      (await postJson(engine.url, "/v1/completions", { prompt: "hi", max_tokens: 4 })).json.choices[0].text,
    ).toBe("!!!!");
    await postJson(engine.url, "/collective_rpc", { method: "reload_weights" });
    expect(
      (await postJson(engine.url, "/v1/completions", { prompt: "hi", max_tokens: 4 })).json.choices[0].text,
    ).toBe(normal);
  });

  test("level 0 only pauses scheduling; tags=scheduling resumes it", async () => {
    const engine = await sim();
    expect((await post(engine.url, "/sleep?level=0")).status).toBe(200);
    expect(await isSleeping(engine.url)).toBe(true);
    expect(await sleepState(engine.url)).toEqual([0, 0, 0]);
    expect(engine.engine.state().sleepingTags).toEqual([]);
    const parked = postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 2 });
    await waitFor(async () => (await metric(engine.url, "vllm:num_requests_waiting")) === 1);
    expect((await post(engine.url, "/wake_up?tags=scheduling")).status).toBe(200);
    expect((await parked).status).toBe(200);
    expect(await isSleeping(engine.url)).toBe(false);
  });

  test("level 1 then level 2 stays level 1, as vLLM ignores a sleep while asleep", async () => {
    const engine = await sim();
    await post(engine.url, "/sleep?level=1");
    expect((await post(engine.url, "/sleep?level=2")).status).toBe(200);
    expect(engine.engine.state()).toMatchObject({ sleepLevel: 1, weightsValid: true });
    expect(await sleepState(engine.url)).toEqual([0, 0, 1]);
    await post(engine.url, "/wake_up");
    const text = (await postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 3 })).json
      .choices[0].text;
    expect(text).not.toContain("!");
  });

  test("a wake while awake and a second sleep are accepted and change nothing", async () => {
    const engine = await sim();
    expect((await post(engine.url, "/wake_up")).status).toBe(200);
    expect(await isSleeping(engine.url)).toBe(false);
    await post(engine.url, "/sleep");
    expect((await post(engine.url, "/sleep")).status).toBe(200);
    expect(await isSleeping(engine.url)).toBe(true);
  });

  test("bad level or mode: FastAPI's query validation error, as vLLM 0.33 declares them (level 0 to 2)", async () => {
    const engine = await sim();
    const level = await postJson(engine.url, "/sleep?level=deep");
    expect(level.status).toBe(400);
    expect(level.json.error).toMatchObject({ type: "Bad Request", param: "query.level", code: 400 });
    expect(await postJson(engine.url, "/sleep?level=3&mode=nap")).toEqual({
      status: 400,
      json: {
        error: {
          message:
            "2 validation errors:\n" +
            "  {'type': 'less_than_equal', 'loc': 'query.level', 'msg': 'Input should be less than or equal to 2', 'input': '3', 'ctx': {'le': 2}}\n" +
            "  {'type': 'literal_error', 'loc': 'query.mode', 'msg': \"Input should be 'abort', 'wait' or 'keep'\", 'input': 'nap', 'ctx': {'expected': \"'abort', 'wait' or 'keep'\"}}",
          type: "Bad Request",
          param: "query.level",
          code: 400,
        },
      },
    });
    expect((await postJson(engine.url, "/sleep?level=-1")).json.error.message).toContain(
      "greater_than_equal",
    );
    expect(await isSleeping(engine.url)).toBe(false);
  });

  test("sleep and wake_up answer vLLM 0.33's JSON: the level slept, awake or still sleeping and the tags", async () => {
    const engine = await sim();
    expect(await postJson(engine.url, "/sleep?level=1")).toEqual({
      status: 200,
      json: { status: "sleeping", level: 1 },
    });
    expect(await postJson(engine.url, "/wake_up?tags=weights")).toEqual({
      status: 200,
      json: { status: "sleeping", tags: ["weights"] },
    });
    expect(await postJson(engine.url, "/wake_up")).toEqual({
      status: 200,
      json: { status: "awake", tags: null },
    });
  });

  test("collective_rpc: reload while the weights sleep is a 500; bad bodies are 400", async () => {
    const engine = await sim();
    await post(engine.url, "/sleep?level=2");
    const early = await postJson(engine.url, "/collective_rpc", { method: "reload_weights" });
    expect(early.status).toBe(500);
    expect(early.json.error.type).toBe("InternalServerError");
    expect((await postJson(engine.url, "/collective_rpc", { args: [] })).json).toEqual({
      error: { message: "Missing 'method' in request body", type: "Bad Request", param: null, code: 400 },
    });
    expect((await post(engine.url, "/collective_rpc", undefined, { body: "{" })).status).toBe(400);
    expect((await postJson(engine.url, "/collective_rpc", { method: "frobnicate" })).status).toBe(500);
  });
});

describe("sleep modes", () => {
  test("abort: decoding and queued requests end with finish_reason abort", async () => {
    const engine = await sim({ ...slowTokens, maxNumSeqs: 1 });
    const stream = new SseStream(
      await post(
        engine.url,
        "/v1/chat/completions",
        chat("long", { max_tokens: 200, ignore_eos: true, stream: true }),
      ),
    );
    await stream.until((s) => s.tokens >= 2);
    const queued = postJson(engine.url, "/v1/completions", { prompt: "queued", max_tokens: 5 });
    await waitFor(async () => (await metric(engine.url, "vllm:num_requests_waiting")) === 1);

    expect((await post(engine.url, "/sleep?level=1&mode=abort")).status).toBe(200);
    const events = await stream.rest();
    expect(events.at(-1)).toBe("[DONE]");
    const last = events.at(-2);
    expect(last.choices[0]).toMatchObject({ delta: { content: "" }, finish_reason: "abort" });
    expect(stream.tokens).toBeLessThan(200);
    const aborted = await queued;
    expect(aborted.status).toBe(200);
    expect(aborted.json.choices[0]).toMatchObject({ finish_reason: "abort", text: "" });
    expect(await metric(engine.url, "vllm:request_success_total", 'finished_reason="abort"')).toBe(2);
    expect(await metric(engine.url, "vllm:num_requests_running")).toBe(0);
  });

  test("wait: the sleep answers after decoding requests finish; new ones are parked meanwhile", async () => {
    const engine = await sim(slowTokens);
    const stream = new SseStream(
      await post(engine.url, "/v1/completions", {
        prompt: "p",
        max_tokens: 15,
        ignore_eos: true,
        stream: true,
      }),
    );
    await stream.until((s) => s.tokens >= 1);
    const sleeping = post(engine.url, "/sleep?level=1&mode=wait");
    // The scheduler pauses at once: /is_sleeping answers true while the drain runs.
    await waitFor(async () => await isSleeping(engine.url));
    const parked = postJson(engine.url, "/v1/completions", { prompt: "later", max_tokens: 2 });
    expect(await settlesWithin(sleeping, 20)).toBe(false);
    await stream.rest();
    expect(stream.finishReason).toBe("length");
    expect(stream.tokens).toBe(15);
    expect((await sleeping).status).toBe(200);
    expect(await sleepState(engine.url)).toEqual([0, 1, 0]);
    expect(await metric(engine.url, "vllm:num_requests_waiting")).toBe(1);
    expect(await settlesWithin(parked, 20)).toBe(false);
    await post(engine.url, "/wake_up");
    expect((await parked).json.choices[0].finish_reason).toBe("length");
  });

  test("keep: decoding requests freeze while asleep and finish after the wake", async () => {
    const engine = await sim(slowTokens);
    const stream = new SseStream(
      await post(
        engine.url,
        "/v1/chat/completions",
        chat("k", { max_tokens: 10, ignore_eos: true, stream: true }),
      ),
    );
    await stream.until((s) => s.tokens >= 2);
    expect((await post(engine.url, "/sleep?level=1&mode=keep")).status).toBe(200);
    const frozenAt = stream.tokens;
    // Nothing more arrives while asleep (several token times pass).
    expect(
      await settlesWithin(
        stream.until((s) => s.tokens > frozenAt + 1),
        80,
      ),
    ).toBe(false);
    expect(await metric(engine.url, "vllm:num_requests_running")).toBe(1);
    await post(engine.url, "/wake_up");
    await stream.rest();
    expect(stream.tokens).toBe(10);
    expect(stream.finishReason).toBe("length");
  });
});

describe("timing", () => {
  test("sleep and wake take their configured time; /is_sleeping waits while the engine is busy", async () => {
    const engine = await sim({ timeScale: 1, loadTimeMs: 0, sleepTimeL1Ms: 150, wakeTimeL1Ms: 150 });
    let started = performance.now();
    const sleeping = post(engine.url, "/sleep?level=1");
    // Asked during the sleep, is_sleeping answers only when the executor is done.
    const asked = getJson(engine.url, "/is_sleeping");
    expect((await asked).json.is_sleeping).toBe(true);
    expect((await sleeping).status).toBe(200);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);

    started = performance.now();
    const waking = post(engine.url, "/wake_up");
    await waitFor(() => engine.engine.state().busy);
    const duringWake = getJson(engine.url, "/is_sleeping");
    expect((await duringWake).json.is_sleeping).toBe(false);
    expect(performance.now() - started).toBeGreaterThanOrEqual(140);
    expect((await waking).status).toBe(200);
  });

  test("the first requests after a wake are slower by --first-request-slowdown, later ones are not", async () => {
    const engine = await sim({
      timeScale: 1,
      loadTimeMs: 0,
      sleepTimeL1Ms: 0,
      wakeTimeL1Ms: 0,
      ttftMs: 20,
      itlMs: 0,
      firstRequestSlowdown: 10,
    });
    const request = () => postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 1 });
    await post(engine.url, "/sleep?level=1");
    // Two requests parked during the sleep are released into the same slow first step.
    const parked = [request(), request()];
    await waitFor(async () => (await metric(engine.url, "vllm:num_requests_waiting")) === 2);
    const woke = performance.now();
    await post(engine.url, "/wake_up");
    for (const answer of await Promise.all(parked)) expect(answer.status).toBe(200);
    expect(performance.now() - woke).toBeGreaterThanOrEqual(190);

    const started = performance.now();
    expect((await request()).status).toBe(200);
    expect(performance.now() - started).toBeLessThan(120);

    // Without parked requests the first one after the wake (a warm-up) takes the slow start.
    await post(engine.url, "/sleep?level=1");
    await post(engine.url, "/wake_up");
    const warmup = performance.now();
    await request();
    expect(performance.now() - warmup).toBeGreaterThanOrEqual(190);
  });
});
