import { describe, expect, test } from "vitest";
import { noFaults } from "../../hack/sim/faults.ts";
import { startSim } from "../../hack/sim/server.ts";
import {
  chat,
  freePort,
  getJson,
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

describe("faults", () => {
  test("wake-fail from the flag: the next wake is a 500, the one after works", async () => {
    const engine = await sim({
      faults: { ...noFaults(), wakeFail: 1 },
    });
    await post(engine.url, "/sleep");
    const failed = await postJson(engine.url, "/wake_up");
    expect(failed.status).toBe(500);
    expect(failed.json.error.type).toBe("InternalServerError");
    expect((await getJson(engine.url, "/is_sleeping")).json.is_sleeping).toBe(true);
    expect((await post(engine.url, "/wake_up")).status).toBe(200);
    expect((await getJson(engine.url, "/is_sleeping")).json.is_sleeping).toBe(false);
  });

  test("faults at run time: POST /sim/faults merges, GET reads, bad input is a 400", async () => {
    const engine = await sim();
    expect((await getJson(engine.url, "/sim/faults")).json).toMatchObject({ wakeFail: 0, dieAfter: 0 });
    const set = await postJson(engine.url, "/sim/faults", { wakeFail: 2 });
    expect(set).toMatchObject({ status: 200, json: { wakeFail: 2, wakeHang: 0 } });
    expect((await postJson(engine.url, "/sim/faults", { crashOnAbortSleep: true })).json).toMatchObject({
      wakeFail: 2,
      crashOnAbortSleep: true,
    });
    expect((await postJson(engine.url, "/sim/faults", { wakeFail: -1 })).status).toBe(400);
    expect((await postJson(engine.url, "/sim/faults", { explode: true })).json.error.message).toContain(
      "unknown fault",
    );
    expect((await post(engine.url, "/sim/faults", undefined, { body: "[" })).status).toBe(400);
    await post(engine.url, "/sleep");
    expect((await post(engine.url, "/wake_up")).status).toBe(500);
    expect((await post(engine.url, "/wake_up")).status).toBe(500);
    expect((await post(engine.url, "/wake_up")).status).toBe(200);
    expect((await getJson(engine.url, "/sim/state")).json).toMatchObject({
      phase: "ready",
      isSleeping: false,
    });
  });

  test("wake-hang: the wake never answers and the engine is stuck, /health still 200", async () => {
    const engine = await sim();
    await postJson(engine.url, "/sim/faults", { wakeHang: 1 });
    await post(engine.url, "/sleep");
    const wake = post(engine.url, "/wake_up", undefined, { signal: AbortSignal.timeout(2_000) });
    wake.catch(() => {});
    await waitFor(() => engine.engine.state().busy);
    expect(await settlesWithin(wake, 100)).toBe(false);
    const asked = fetch(`${engine.url}/is_sleeping`, { signal: AbortSignal.timeout(2_000) });
    asked.catch(() => {});
    expect(await settlesWithin(asked, 50)).toBe(false);
    const parked = postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 1 });
    parked.catch(() => {});
    expect(await settlesWithin(parked, 50)).toBe(false);
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
    expect(await metric(engine.url, "vllm:num_requests_waiting")).toBe(1);
  });

  test("crash-on-abort-sleep: a sleep with mode=abort during decode kills the engine", async () => {
    const engine = await sim({ itlMs: 1_000 });
    await postJson(engine.url, "/sim/faults", { crashOnAbortSleep: true });
    const stream = new SseStream(
      await post(
        engine.url,
        "/v1/chat/completions",
        chat("x", { max_tokens: 100, ignore_eos: true, stream: true }),
      ),
    );
    await stream.until((s) => s.tokens >= 1);
    const sleep = post(engine.url, "/sleep?mode=abort");
    await expect(sleep).rejects.toThrow();
    expect(await engine.died).toContain("mode=abort");
    await expect(stream.rest()).rejects.toThrow();
    expect(stream.finishReason).toBeUndefined();
    expect(await portOpen(engine.port)).toBe(false);
  });

  test("crash-on-abort-sleep spares a sleep with nothing decoding, and mode=wait", async () => {
    const engine = await sim({ itlMs: 1_000 });
    await postJson(engine.url, "/sim/faults", { crashOnAbortSleep: true });
    expect((await post(engine.url, "/sleep?mode=abort")).status).toBe(200);
    await post(engine.url, "/wake_up");
    const stream = new SseStream(
      await post(engine.url, "/v1/completions", {
        prompt: "x",
        max_tokens: 5,
        ignore_eos: true,
        stream: true,
      }),
    );
    await stream.until((s) => s.tokens >= 1);
    expect((await post(engine.url, "/sleep?mode=wait")).status).toBe(200);
    await stream.rest();
    expect(stream.finishReason).toBe("length");
    expect(engine.engine.phase).toBe("ready");
  });

  test("die-after: the engine dies once n responses were sent", async () => {
    const engine = await sim();
    await postJson(engine.url, "/sim/faults", { dieAfter: 2 });
    expect((await postJson(engine.url, "/v1/completions", { prompt: "1", max_tokens: 2 })).status).toBe(200);
    const stream = await post(engine.url, "/v1/completions", { prompt: "2", max_tokens: 2, stream: true });
    expect((await stream.text()).endsWith("data: [DONE]\n\n")).toBe(true);
    expect(await engine.died).toContain("after 2 requests");
    await expect(fetch(`${engine.url}/health`)).rejects.toThrow();
  });

  test("drop-connection: the next request's connection is reset before any answer; the engine serves on", async () => {
    const engine = await sim();
    await postJson(engine.url, "/sim/faults", { dropConnection: 1 });
    await expect(postJson(engine.url, "/v1/completions", { prompt: "1", max_tokens: 2 })).rejects.toThrow();
    expect((await postJson(engine.url, "/v1/completions", { prompt: "2", max_tokens: 2 })).status).toBe(200);
    expect((await getJson(engine.url, "/sim/faults")).json).toMatchObject({ dropConnection: 0 });
    expect((await fetch(`${engine.url}/health`)).status).toBe(200);
  });

  test("never-ready: the port never opens", async () => {
    const port = await freePort();
    const engine = track(
      await startSim(
        {
          port,
          loadTimeMs: 0,
          faults: { ...noFaults(), neverReady: true },
        },
        { waitReady: false },
      ),
    );
    expect(await settlesWithin(engine.ready, 100)).toBe(false);
    expect(await portOpen(port)).toBe(false);
    expect(engine.engine.phase).toBe("loading");
    await engine.close();
    await expect(engine.ready).rejects.toThrow("aborted");
  });

  test("POST /sim/crash kills the engine", async () => {
    const engine = await sim();
    expect((await postJson(engine.url, "/sim/crash")).json).toEqual({ crashing: true });
    expect(await engine.died).toContain("/sim/crash");
    expect(await portOpen(engine.port)).toBe(false);
  });
});

describe("sleep-fail", () => {
  test("the next sleep is a 500 and the engine stays awake and serving; the one after works", async () => {
    const engine = await sim({ faults: { ...noFaults(), sleepFail: 1 } });
    const failed = await postJson(engine.url, "/sleep?level=1&mode=wait");
    expect(failed.status).toBe(500);
    expect((await getJson(engine.url, "/is_sleeping")).json).toEqual({ is_sleeping: false });
    expect((await postJson(engine.url, "/v1/completions", { prompt: "x", max_tokens: 2 })).status).toBe(200);
    expect((await postJson(engine.url, "/sleep?level=1&mode=wait")).status).toBe(200);
    expect((await getJson(engine.url, "/is_sleeping")).json).toEqual({ is_sleeping: true });
  });
});
