/**
 * The request id OpenAI's SDKs show (`x-request-id`: `request_id` in Node, `_request_id` in
 * Python) through `snooze serve`, against an engine that sends one (vLLM's
 * `--enable-request-id-headers`). Hold progress answers a held stream before the engine does, so
 * the engine's header came too late and the id was lost (found by an outside tester with the Node
 * SDK): Snooze now names the request in that early head and gives the engine the same id.
 */
import OpenAI from "openai";
import { afterEach, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { startLocalSnooze } from "../../cli/local-snooze.ts";
import { silentLogger } from "../../lib/log.ts";
import { parseConfig } from "../../lib/settings/index.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const config = `
models:
  qwen:
    streamProgress: true
    command: ${simCommand(["--load-time", "1500ms", "--enable-request-id-headers"], 1)}
`;

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });

/** One streamed chat completion: the id the SDK read from the head, and the one its chunks carry. */
async function streamedIds(openai: OpenAI, options: OpenAI.RequestOptions = {}, extra = {}) {
  const { data, request_id } = await openai.chat.completions
    .create(
      { model: "qwen", messages: [{ role: "user", content: "hi" }], max_tokens: 3, stream: true, ...extra },
      options,
    )
    .withResponse();
  const chunks = new Set<string>();
  for await (const chunk of data) chunks.add(chunk.id);
  return { requestId: request_id, chunkIds: [...chunks] };
}

describe("x-request-id through hold progress", () => {
  test("a held stream's head names the request, and the engine used the same id", async () => {
    snooze = await startWith(config);
    const held = await streamedIds(client(snooze.url));
    expect(held.requestId).toMatch(/^[0-9a-f]{32}$/);
    expect(held.chunkIds).toEqual([`chatcmpl-${held.requestId}`]);
    // Once the model is ready nothing is held: the engine's own header, as it sent it (vLLM draws
    // it apart from the id in the body when the client sent none).
    const direct = await streamedIds(client(snooze.url));
    expect(direct.requestId).toMatch(/^[0-9a-f]{32}$/);
    expect(direct.requestId).not.toBe(held.requestId);
  });

  test("a client's own X-Request-Id is kept, held or not", async () => {
    snooze = await startWith(config);
    const held = await streamedIds(client(snooze.url), { headers: { "X-Request-Id": "mine-1" } });
    expect(held).toEqual({ requestId: "mine-1", chunkIds: ["chatcmpl-mine-1"] });
    const direct = await streamedIds(client(snooze.url), { headers: { "X-Request-Id": "mine-2" } });
    expect(direct).toEqual({ requestId: "mine-2", chunkIds: ["chatcmpl-mine-2"] });
  });

  test("a body's request_id (vLLM's extension) still names the engine's request", async () => {
    snooze = await startWith(config);
    const held = await streamedIds(client(snooze.url), {}, { request_id: "body-7" });
    expect(held).toEqual({ requestId: "body-7", chunkIds: ["chatcmpl-body-7"] });
  });

  test("a body's request_id that no header can carry crashes nothing: the engine names its request by it, the head by a fresh id", async () => {
    // Found by an outside tester: hold progress wrote the body's id into its head as it was, and a
    // line break (or a character past Latin-1) made Node throw in a timer, which ended the process.
    snooze = await startWith(config);
    const unfit = ["two\nlines", "carriage\rreturn", "日本語", " padded ", "tab\tin", "x".repeat(2_000)];
    // All held at once, by the one cold start: each gets hold progress's head.
    const held = await Promise.all(
      unfit.map((id) => streamedIds(client(snooze!.url), {}, { request_id: id })),
    );
    for (const [i, id] of unfit.entries()) {
      expect(held[i]!.requestId).toMatch(/^[0-9a-f]{32}$/);
      // vLLM names a request by the header, else by the body's request_id: no header went, so the
      // engine used the body's, as it would have without Snooze.
      expect(held[i]!.chunkIds).toEqual([`chatcmpl-${id}`]);
    }
    expect(new Set(held.map((h) => h.requestId)).size).toBe(unfit.length);
    expect((await fetch(`${snooze.url}/healthz`)).status).toBe(200);
  });

  test("a large body's request_id too, read off the event loop as the body was", async () => {
    snooze = await startWith(config);
    // Past offLoopBytes (256 KiB): the activator parsed it on a worker, and kept only what it reads.
    const held = await streamedIds(
      client(snooze.url),
      {},
      { request_id: "big-1", user: "x".repeat(300_000) },
    );
    expect(held).toEqual({ requestId: "big-1", chunkIds: ["chatcmpl-big-1"] });
  });
});

test("a browser page allowed by --allowed-origins may read the request id (Access-Control-Expose-Headers)", async () => {
  // Without it the browser hides X-Request-Id from the page, and the SDK's request_id is null there.
  const page = "https://chat.example";
  snooze = await startLocalSnooze({
    config: parseConfig(config, "test.yaml"),
    log: silentLogger,
    host: "127.0.0.1",
    port: 0,
    allowedOrigins: [page],
  });
  const response = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { origin: page, "content-type": "application/json", "x-request-id": "page-1" },
    body: JSON.stringify({ model: "qwen", messages: [{ role: "user", content: "hi" }], max_tokens: 1 }),
  });
  await response.text();
  expect(response.headers.get("x-request-id")).toBe("page-1");
  const exposed = response.headers.get("access-control-expose-headers")!.toLowerCase().split(/,\s*/);
  expect(exposed).toContain("x-request-id");
});

describe("x-request-id on Snooze's own answers", () => {
  const own = `
maxBodySize: 1Ki
models:
  qwen:
    holdBudget: 300ms
    command: ${simCommand(["--load-time", "5s"], 1)}
`;

  test("the openai client's request_id on an unknown model's 404 and a spent hold budget's 503: the caller's id, else a fresh one", async () => {
    snooze = await startWith(own);
    const sdk = client(snooze.url);
    const fails = (model: string, headers: Record<string, string> = {}) =>
      sdk.chat.completions.create({ model, messages: [{ role: "user", content: "hi" }] }, { headers }).then(
        () => {
          throw new Error("expected an error");
        },
        (error: InstanceType<typeof OpenAI.APIError>) => error,
      );
    const unknown = await fails("nope", { "X-Request-Id": "mine-404" });
    expect([unknown.status, unknown.requestID]).toEqual([404, "mine-404"]);
    const fresh = await fails("nope");
    expect(fresh.requestID).toMatch(/^[0-9a-f]{32}$/);
    const budget = await fails("qwen", { "X-Request-Id": "mine-503" });
    expect([budget.status, budget.code, budget.requestID]).toEqual([503, "hold_budget_exceeded", "mine-503"]);
  });

  test("raw HTTP: a 400 for a body that is not JSON, a 413 for one too large, a 404 for no route", async () => {
    snooze = await startWith(own);
    const post = (path: string, body: string, headers: Record<string, string> = {}) =>
      fetch(`${snooze!.url}${path}`, {
        method: "POST",
        headers: { "content-type": "application/json", ...headers },
        body,
      });
    const invalid = await post("/v1/chat/completions", "{nope", { "x-request-id": "raw-400" });
    expect([invalid.status, invalid.headers.get("x-request-id")]).toEqual([400, "raw-400"]);
    const large = await post("/v1/chat/completions", "x".repeat(2_048));
    expect(large.status).toBe(413);
    expect(large.headers.get("x-request-id")).toMatch(/^[0-9a-f]{32}$/);
    const route = await post("/v1/nowhere", "{}", { "x-request-id": "raw-404" });
    expect([route.status, route.headers.get("x-request-id")]).toEqual([404, "raw-404"]);
  });
});
