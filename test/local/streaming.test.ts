import { afterEach, describe, expect, test } from "vitest";
import type { LocalPlatform } from "../../autoscaler/local/platform.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

/** Reads an SSE body, recording when each chunk arrived. */
async function readStream(response: Response) {
  const arrivals: { at: number; text: string }[] = [];
  const decoder = new TextDecoder();
  for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
    arrivals.push({ at: performance.now(), text: decoder.decode(chunk) });
  }
  return arrivals;
}

describe("streaming through the activator", () => {
  test("chunks arrive as the engine produces them, not at the end", async () => {
    snooze = await startWith(`
models:
  qwen:
    command: ${simCommand(["--itl", "40ms", "--ttft", "10ms", "--load-time", "200ms"], 1)}
`);
    const response = await fetch(
      `${snooze.url}/v1/chat/completions`,
      chat("qwen", { stream: true, max_tokens: 12 }),
    );
    expect(response.status).toBe(200);
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const arrivals = await readStream(response);
    const all = arrivals.map((a) => a.text).join("");
    expect(all.trim().endsWith("data: [DONE]")).toBe(true);
    expect(arrivals.length).toBeGreaterThanOrEqual(6);
    // 12 tokens at 40 ms apart: the first and last chunk are several inter-token gaps apart.
    expect(arrivals.at(-1)!.at - arrivals[0]!.at).toBeGreaterThan(200);
  });

  test("a client abort cancels the upstream request", async () => {
    snooze = await startWith(`
models:
  qwen:
    command: ${simCommand(["--itl", "50ms", "--load-time", "200ms"], 1)}
`);
    const leaving = new AbortController();
    const response = await fetch(`${snooze.url}/v1/chat/completions`, {
      ...chat("qwen", { stream: true, max_tokens: 1000 }),
      signal: leaving.signal,
    });
    const reader = response.body!.getReader();
    await reader.read();
    const address = snooze.autoscaler.controller("qwen")!.state().address!;
    const running = async () => {
      const text = await (await fetch(`http://${address}/metrics`)).text();
      return Number(/^vllm:num_requests_running\{[^}]*\} (\S+)/m.exec(text)?.[1] ?? "0");
    };
    expect(await running()).toBe(1);
    leaving.abort();
    await until(async () => (await running()) === 0, 3_000, "the engine to drop the request");
    await until(() => snooze!.activator.routes.get("qwen")!.inFlight === 0, 3_000, "in-flight to reach 0");
  });

  test("an engine that dies mid-stream: the client gets a clean error; the next request restarts it", async () => {
    snooze = await startWith(`
models:
  qwen:
    command: ${simCommand(["--itl", "20ms", "--load-time", "200ms"], 1)}
`);
    const first = await fetch(
      `${snooze.url}/v1/chat/completions`,
      chat("qwen", { stream: true, max_tokens: 200 }),
    );
    const reader = first.body!.getReader();
    await reader.read();
    const state = snooze.autoscaler.controller("qwen")!.state();
    const platform = snooze.platform as LocalPlatform;
    process.kill(platform.pid(state.replica!)!, "SIGKILL");
    let text = "";
    const decoder = new TextDecoder();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += decoder.decode(value);
    }
    expect(text).toContain('"code":"upstream_broken"');
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    await until(() => snooze!.autoscaler.controller("qwen")!.tier === "cold", 3_000, "cold after the crash");
    const next = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"));
    expect(next.status).toBe(200);
  });
});

/** `snooze_requests_total` by status code, those counted. */
function requestsCounted(metrics: string): Record<string, number> {
  const counted: Record<string, number> = {};
  for (const [, code, value] of metrics.matchAll(/^snooze_requests_total\{[^}]*code="(\d+)"[^}]*\} (\S+)$/gm))
    counted[code!] = (counted[code!] ?? 0) + Number(value);
  return counted;
}

describe("progress while a streaming request is held (streamProgress)", () => {
  test("SSE comments while the engine starts, then the engine's stream", async () => {
    snooze = await startWith(`
models:
  qwen:
    streamProgress: true
    command: ${simCommand(["--load-time", "3500ms"], 1)}
`);
    const response = await fetch(
      `${snooze.url}/v1/chat/completions`,
      chat("qwen", { stream: true, max_tokens: 3 }),
    );
    expect(response.status).toBe(200);
    const text = await response.text();
    // A first start has no measured duration to estimate from: it says how long it has waited.
    const comments = text.split("\n").filter((line) => /^: starting qwen, [\d.]+m?s so far$/.test(line));
    expect(comments.length).toBeGreaterThanOrEqual(1);
    expect(text.indexOf(": starting")).toBeLessThan(text.indexOf("data: {"));
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
  });

  test('"stream": "true" is a stream, as vLLM (pydantic, lax) reads it: progress too', async () => {
    snooze = await startWith(`
models:
  qwen:
    streamProgress: true
    command: ${simCommand(["--load-time", "2500ms"], 1)}
`);
    const response = await fetch(
      `${snooze.url}/v1/chat/completions`,
      chat("qwen", { stream: "true", max_tokens: 3 }),
    );
    expect(response.headers.get("content-type")).toContain("text/event-stream");
    const text = await response.text();
    expect(text.indexOf(": starting qwen")).toBeGreaterThanOrEqual(0);
    expect(text.indexOf(": starting")).toBeLessThan(text.indexOf("data: {"));
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
  });

  test("a hold that fails after progress began ends the stream with an error event", async () => {
    snooze = await startWith(`
models:
  qwen:
    streamProgress: true
    holdBudget: 1500ms
    command: ${simCommand(["--load-time", "20s"], 1)}
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen", { stream: true }));
    expect(response.status).toBe(200);
    const text = await response.text();
    expect(text).toContain(": starting qwen");
    expect(text).toContain('"code":"hold_budget_exceeded"');
    expect(text.trim().endsWith("data: [DONE]")).toBe(true);
    expect(requestsCounted(await snooze.registry.metrics())).toEqual({ 503: 1 });
  });

  test("a client that leaves after progress began counts as 499, not as a 503 nobody was sent", async () => {
    // Found by an outside tester: it inflated the 5xx count.
    snooze = await startWith(`
models:
  qwen:
    streamProgress: true
    command: ${simCommand(["--load-time", "20s"], 1)}
`);
    const leave = new AbortController();
    const response = await fetch(`${snooze.url}/v1/chat/completions`, {
      ...chat("qwen", { stream: true }),
      signal: leave.signal,
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    expect(new TextDecoder().decode((await reader.read()).value)).toContain(": starting qwen");
    leave.abort();
    await until(() => snooze!.activator.routes.get("qwen")!.held === 0, 5_000, "the hold ended");
    await until(
      async () => Object.keys(requestsCounted(await snooze!.registry.metrics())).length > 0,
      5_000,
      "the request counted",
    );
    expect(requestsCounted(await snooze.registry.metrics())).toEqual({ 499: 1 });
  });

  test("off by default: a held streaming request that fails gets a plain 503", async () => {
    snooze = await startWith(`
models:
  qwen:
    holdBudget: 1500ms
    command: ${simCommand(["--load-time", "20s"], 1)}
`);
    const response = await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen", { stream: true }));
    expect(response.status).toBe(503);
    expect(response.headers.get("retry-after")).toBeTruthy();
  });
});
