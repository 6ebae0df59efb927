import { execFile } from "node:child_process";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { promisify } from "node:util";
import { context, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { CompositePropagator, W3CBaggagePropagator, W3CTraceContextPropagator } from "@opentelemetry/core";
import { afterEach, expect, test, vi } from "vitest";
import { freePort } from "../lib/free-port.ts";
import { EngineClient, EngineError, vllmApiKey } from "./engine-client.ts";

/** A real HTTP server standing in for an engine; `answer` decides each reply and sees every request. */
const servers: Server[] = [];
afterEach(async () => {
  for (const server of servers.splice(0)) {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  }
});

async function engine(
  answer: (req: IncomingMessage, res: ServerResponse, body: string) => void,
): Promise<{ client: EngineClient; calls: string[] }> {
  const calls: string[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.on("data", (chunk: Buffer) => (body += chunk));
    req.on("end", () => {
      calls.push(`${req.method} ${req.url}${body ? ` ${body}` : ""}`);
      answer(req, res, body);
    });
  });
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return { client: new EngineClient(`127.0.0.1:${(server.address() as AddressInfo).port}`), calls };
}

const json = (res: ServerResponse, status: number, body: unknown) => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

test("an engine that sends 100 Continue unasked before each answer: health checks, wake and is_sleeping still work (undici alone fails them)", async () => {
  const { client, calls } = await engine((req, res) => {
    res.writeContinue();
    if (req.url === "/is_sleeping") json(res, 200, { is_sleeping: false });
    else res.end();
  });
  expect(await client.healthy()).toBe(true);
  await client.wake(1, 5_000);
  expect(await client.healthy()).toBe(true);
  expect(calls).toEqual(["GET /health", "POST /wake_up", "GET /is_sleeping", "GET /health"]);
});

test("a level-2 wake wakes the weights, reloads them, wakes the KV cache, then checks is_sleeping", async () => {
  const { client, calls } = await engine((req, res) =>
    req.url === "/is_sleeping" ? json(res, 200, { is_sleeping: false }) : res.end(),
  );
  await client.wake(2, 5_000);
  expect(calls).toEqual([
    "POST /wake_up?tags=weights",
    'POST /collective_rpc {"method":"reload_weights"}',
    "POST /wake_up?tags=kv_cache",
    "GET /is_sleeping",
  ]);
});

test("an engine still asleep after wake_up, or answering an error, fails the call with what it said", async () => {
  const { client } = await engine((req, res) =>
    req.url === "/is_sleeping"
      ? json(res, 200, { is_sleeping: true })
      : json(res, 500, { error: { message: "CUDA out of memory" } }),
  );
  await expect(client.isSleeping()).resolves.toBe(true);
  const failed = await client.sleep(1, "wait", 5_000).catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(EngineError);
  expect((failed as EngineError).status).toBe(500);
  expect((failed as Error).message).toBe(
    'POST /sleep?level=1&mode=wait answered 500: {"error":{"message":"CUDA out of memory"}}',
  );
});

test("a sleep checks is_sleeping after the engine's 200: one still awake fails the call (found by an outside tester: a slot's target was started beside it)", async () => {
  let asleep = false;
  const { client, calls } = await engine((req, res) =>
    req.url === "/is_sleeping" ? json(res, 200, { is_sleeping: asleep }) : res.end(),
  );
  const failed = await client.sleep(1, "wait", 5_000).catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(EngineError);
  expect((failed as Error).message).toBe("the engine still reports is_sleeping=false after sleep");
  expect(calls).toEqual(["POST /sleep?level=1&mode=wait", "GET /is_sleeping"]);
  asleep = true;
  await client.sleep(2, "wait", 5_000);
  expect(calls.slice(2)).toEqual(["POST /sleep?level=2&mode=wait", "GET /is_sleeping"]);
});

test("a warm-up must come back as a completion", async () => {
  const { client, calls } = await engine((_req, res, body) =>
    JSON.parse(body).model === "good"
      ? json(res, 200, { choices: [{ text: "!" }] })
      : json(res, 200, { choices: [] }),
  );
  await client.warmup("good", 5_000);
  expect(calls[0]).toBe('POST /v1/completions {"model":"good","prompt":"warm-up","max_tokens":1}');
  await expect(client.warmup("broken", 5_000)).rejects.toThrow(/did not return a completion/);
});

test("a warm-up whose connection drops before any answer is sent once more; a second drop fails it", async () => {
  let drops = 1;
  const { client, calls } = await engine((req, res) => {
    if (drops-- > 0) return req.socket.destroy();
    json(res, 200, { choices: [{ text: "!" }] });
  });
  await client.warmup("m", 5_000);
  expect(calls).toHaveLength(2);
  drops = 2;
  await expect(client.warmup("m", 5_000)).rejects.toThrow(/^POST \/v1\/completions: /);
  expect(calls).toHaveLength(4);
});

test("an engine that is not there says why (not fetch's 'fetch failed'); one that never answers times out", async () => {
  const gone = new EngineClient(`127.0.0.1:${await freePort()}`);
  await expect(gone.healthy(1_000)).resolves.toBe(false);
  await expect(gone.isSleeping()).rejects.toThrow(
    /^GET \/is_sleeping: connect ECONNREFUSED 127\.0\.0\.1:\d+$/,
  );
  const { client } = await engine(() => {}); // takes the request, never answers
  await expect(client.healthy(200)).resolves.toBe(false);
  const stuck = await client.wake(1, 200).catch((error: unknown) => error);
  // The wake's budget, however little of it was left when the call went out.
  expect(stuck).toMatchObject({ message: "POST /wake_up: no answer within 200ms", timedOut: true });
  expect(await gone.wake(1, 200).catch((error: unknown) => error)).toMatchObject({ timedOut: false });
});

test("a call nothing listened for is refused; one the engine took and then cut is not (it reached the engine)", async () => {
  const gone = new EngineClient(`127.0.0.1:${await freePort()}`);
  expect(await gone.wake(1, 1_000).catch((error: unknown) => error)).toMatchObject({
    refused: true,
    local: false,
  });
  const { client } = await engine((req) => req.socket.destroy());
  expect(await client.wake(1, 1_000).catch((error: unknown) => error)).toMatchObject({
    refused: false,
    reset: false,
  });
  // A reset (a port closed with the call waiting on it, or an engine that died with it unread) is told.
  const { client: resetting } = await engine((req) => req.socket.resetAndDestroy());
  expect(await resetting.wake(1, 1_000).catch((error: unknown) => error)).toMatchObject({
    refused: false,
    reset: true,
  });
});

test("a health check this process cannot make (out of file descriptors) rejects as local, not 'unhealthy' (found by an outside tester: the self-heal replaced healthy engines)", async () => {
  // A connection per check, so the check must open one.
  const { client } = await engine((_req, res) => {
    res.writeHead(200, { connection: "close" });
    res.end();
  });
  // In a process of its own whose file descriptors are all taken once undici is loaded.
  const script = `
    const { EngineClient } = await import(${JSON.stringify(new URL("./engine-client.ts", import.meta.url).href)});
    const client = new EngineClient(process.argv[1]);
    await client.healthy(2000);
    const held = [];
    try { for (;;) held.push((await import("node:fs")).openSync("/dev/null", "r")); } catch {}
    const answer = await client.healthy(2000).then((healthy) => ({ healthy }), (error) => ({ message: error.message, local: error.local }));
    console.log(JSON.stringify(answer));`;
  const { stdout } = await promisify(execFile)(
    "sh",
    [
      "-c",
      'ulimit -n 64 && exec "$0" --input-type=module -e "$1" "$2"',
      process.execPath,
      script,
      client.baseUrl.slice(7),
    ],
    { timeout: 20_000 },
  );
  expect(JSON.parse(stdout)).toEqual({
    message: expect.stringMatching(/^GET \/health: connect EMFILE/),
    local: true,
  });
});

test("a sleep call abandoned by its caller's signal ends at once, before its own timeout", async () => {
  const { client, calls } = await engine(() => {}); // takes the sleep, never answers (frozen)
  const abandon = new AbortController();
  const started = performance.now();
  const call = client.sleep(1, "wait", 60_000, abandon.signal).catch((error: unknown) => error);
  await new Promise((resolve) => setTimeout(resolve, 50));
  expect(calls).toEqual(["POST /sleep?level=1&mode=wait"]);
  abandon.abort(new Error("stopped answering its health check"));
  const failed = await call;
  expect(performance.now() - started).toBeLessThan(5_000);
  expect(failed).toBeInstanceOf(EngineError);
  expect(failed).toMatchObject({
    message: "POST /sleep?level=1&mode=wait: stopped answering its health check",
    timedOut: false,
  });
  // Without the signal aborted, the call's own timeout still holds.
  const stuck = await client.sleep(1, "wait", 100, new AbortController().signal).catch((e: unknown) => e);
  expect(stuck).toMatchObject({
    message: "POST /sleep?level=1&mode=wait: no answer within 100ms",
    timedOut: true,
  });
});

test("each call's time limit ends with the call, answered or failed (found by a probe: a warm-up's stayed for its whole 10 minutes)", async () => {
  let asleep = false;
  const { client } = await engine((req, res) => {
    if (req.url === "/is_sleeping") json(res, 200, { is_sleeping: asleep });
    else if (req.url === "/v1/completions") json(res, 200, { choices: [{ text: "ok" }] });
    else res.end();
  });
  // Distinct limits, so that only these calls' timers are counted.
  const limits = new Set([600_001, 600_002, 600_003, 600_004, 600_005]);
  const armed: unknown[] = [];
  const cleared = new Set<unknown>();
  const arm = vi.spyOn(globalThis, "setTimeout");
  const clear = vi.spyOn(globalThis, "clearTimeout");
  try {
    await client.sleep(1, "wait", 600_001).catch(() => {}); // still awake: fails
    asleep = true;
    await client.sleep(1, "wait", 600_002);
    await client.wake(2, 600_003).catch(() => {}); // still asleep: fails
    asleep = false;
    await client.warmup("m", 600_004);
    await client.healthy(600_005);
    for (const [index, [, ms]] of arm.mock.calls.entries())
      if (limits.has(ms as number)) armed.push(arm.mock.results[index]!.value);
    for (const [handle] of clear.mock.calls) cleared.add(handle);
  } finally {
    arm.mockRestore();
    clear.mockRestore();
  }
  expect(armed).toHaveLength(5);
  expect(armed.filter((handle) => !cleared.has(handle))).toEqual([]);
});

test("health is any 2xx; metrics are read whatever the status", async () => {
  let healthStatus = 200;
  const { client } = await engine((req, res) => {
    if (req.url === "/health") {
      res.writeHead(healthStatus);
      res.end();
      return;
    }
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(
      [
        'vllm:num_requests_running{model_name="m"} 3',
        'vllm:num_requests_waiting{model_name="m"} 1',
        'vllm:engine_sleep_state{model_name="m",sleep_state="awake"} 0',
        'vllm:engine_sleep_state{model_name="m",sleep_state="weights_offloaded"} 1',
      ].join("\n"),
    );
  });
  await expect(client.healthy()).resolves.toBe(true);
  healthStatus = 503;
  await expect(client.healthy()).resolves.toBe(false);
  // A status HTTP does not have (the activator tells its client so) is no health either.
  healthStatus = 799;
  await expect(client.healthy()).resolves.toBe(false);
  await expect(client.load()).resolves.toEqual({ running: 3, waiting: 1 });
  await expect(client.sleepLevel()).resolves.toBe(1);
});

test("metrics with timestamps: load and sleep level are read from the values (found by an outside tester: the timestamps were)", async () => {
  const { client } = await engine((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    res.end(
      [
        'vllm:num_requests_running{model_name="m"} 3 1712345678000',
        'vllm:num_requests_waiting{model_name="m"} 1 1712345678000',
        'vllm:engine_sleep_state{model_name="m",sleep_state="awake"} 0 1712345678000',
        'vllm:engine_sleep_state{model_name="m",sleep_state="weights_offloaded"} 1 1712345678000',
        'vllm:engine_sleep_state{model_name="m",sleep_state="discard_all"} 0 1712345678000',
      ].join("\n"),
    );
  });
  await expect(client.load()).resolves.toEqual({ running: 3, waiting: 1 });
  await expect(client.sleepLevel()).resolves.toBe(1);
});

test("a call made within an activation carries its trace context, not the first caller's baggage", async () => {
  // What an SDK registers by default: a context manager and OTEL_PROPAGATORS=tracecontext,baggage.
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  propagation.setGlobalPropagator(
    new CompositePropagator({ propagators: [new W3CTraceContextPropagator(), new W3CBaggagePropagator()] }),
  );
  try {
    const seen: IncomingMessage["headers"][] = [];
    const { client } = await engine((req, res) => {
      seen.push(req.headers);
      json(res, 200, { choices: [{ text: "x" }] });
    });
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const caller = propagation.setBaggage(
      trace.setSpanContext(ROOT_CONTEXT, { traceId, spanId: "00f067aa0ba902b7", traceFlags: 1 }),
      propagation.createBaggage({ "user.id": { value: "alice" } }),
    );
    await context.with(caller, () => client.warmup("m", 5_000));
    expect(seen[0]?.traceparent).toBe(`00-${traceId}-00f067aa0ba902b7-01`);
    expect(seen[0]?.baggage).toBeUndefined();
  } finally {
    propagation.disable();
    context.disable();
  }
});

test("an engine run with vLLM's --api-key gets the key on its /v1 calls (the warm-up), none on the sleep API", async () => {
  // Found by an outside tester: the warm-up went without the key, was answered 401, and the start failed.
  const seen: string[] = [];
  const { client: plain } = await engine((req, res) => {
    seen.push(`${req.method} ${req.url} ${req.headers.authorization ?? "-"}`);
    if (req.url === "/is_sleeping") json(res, 200, { is_sleeping: false });
    else if (req.url === "/v1/completions") json(res, 200, { choices: [{ text: "!" }] });
    else res.end();
  });
  const keyed = new EngineClient(plain.baseUrl.slice("http://".length), "sekrit");
  await keyed.wake(1, 5_000);
  await keyed.warmup("m", 5_000);
  await plain.warmup("m", 5_000);
  expect(seen).toEqual([
    "POST /wake_up -",
    "GET /is_sleeping -",
    "POST /v1/completions Bearer sekrit",
    "POST /v1/completions -",
  ]);
});

test("the API key a vllm serve command runs with: after --api-key (or =), else VLLM_API_KEY", () => {
  expect(vllmApiKey(["serve", "m", "--api-key", "a", "--port", "1"], {})).toBe("a");
  expect(vllmApiKey(["serve", "m", "--api-key=b"], { VLLM_API_KEY: "c" })).toBe("b");
  expect(vllmApiKey(["serve", "m"], { VLLM_API_KEY: "c" })).toBe("c");
  expect(vllmApiKey(["serve", "m", "--api-key"], {})).toBeUndefined();
  expect(vllmApiKey(["serve", "m", "--api-key", "--port", "1"], { VLLM_API_KEY: "" })).toBeUndefined();
});

test("an answer larger than 16 MiB (a /metrics that does not end) fails the call, read no further", async () => {
  // Found by an outside tester reading the engine client: answers were read whole with body.text(),
  // so this one was taken, and an endless one would be kept for as long as the call's deadline lets it.
  const chunk = Buffer.alloc(1024 * 1024, "#");
  const { client } = await engine((_req, res) => {
    res.writeHead(200, { "content-type": "text/plain" });
    for (let i = 0; i < 20; i++) res.write(chunk);
    res.end();
  });
  await expect(client.load(30_000)).rejects.toThrow("GET /metrics: the answer is larger than 16777216 bytes");
});
