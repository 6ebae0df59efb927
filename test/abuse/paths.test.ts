import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { checkEnginePath, engineRoutes } from "../../activator/openai-path.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";
import { finalBody, finalStatus, rawRequest } from "./harness.ts";

/**
 * Only the OpenAI API reaches an engine. The canary is a sim engine in sleep mode with dev mode on
 * (its /sleep, /wake_up and /collective_rpc are live, as on a real vLLM under Snooze); the sim
 * resolves dot-segments and escapes like a browser URL parser, so a forwarded `/v1/../sleep` would
 * put it to sleep. `/sim/state` counts every request line exactly as it arrived.
 */
let snooze: LocalSnooze;
let engine: string;
let port: number;

beforeAll(async () => {
  snooze = await startWith(`
models:
  canary:
    sleepAfter: never
    command: ${simCommand(["--enable-sleep-mode"])}
`);
  port = Number(new URL(snooze.url).port);
  const first = await fetch(`${snooze.url}/v1/chat/completions`, chat("canary"));
  expect(first.status).toBe(200);
  engine = snooze.activator.routes.get("canary")!.replicas()[0]!.address;
});
afterAll(() => snooze?.close(1_000));

interface SimState {
  isSleeping: boolean;
  requests: Record<string, number>;
}
const simState = async (): Promise<SimState> =>
  (await fetch(`http://${engine}/sim/state`)).json() as Promise<SimState>;

/** What the control plane itself sends an engine, and the inference routes: nothing else may show up. */
const expected = new Set([
  "POST /v1/chat/completions",
  "POST /v1/completions",
  "GET /is_sleeping",
  "GET /health",
  "GET /metrics",
  "GET /v1/models",
  "GET /sim/state",
]);
const unexpected = (state: SimState) => Object.keys(state.requests).filter((line) => !expected.has(line));

const body = JSON.stringify({ model: "canary", prompt: "hi", max_tokens: 1 });
const rawPost = (path: string, extra = "") =>
  rawRequest(
    port,
    `POST ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n${extra}connection: close\r\n\r\n`,
    body,
  );

describe("path tricks against a canary engine", () => {
  const tricks = [
    "/v1/../sleep",
    "/v1/%2e%2e/sleep",
    "/v1/%2E%2E/sleep?level=1",
    "/v1/.%2e/sleep",
    "/v1/..%2fsleep",
    "/v1/..%2Fsleep",
    "/v1\\..\\sleep",
    "/v1/..\\sleep",
    "/v1/%5c..%5csleep",
    "//v1/chat/completions",
    "/v1//chat/completions",
    "/v1/chat/completions/../../wake_up",
    "/v1/chat/completions/..%2f..%2fcollective_rpc",
    "/v1/chat/completions%00",
    "/v1/chat/completions%2500",
    "/v1/%252e%252e/sleep",
    "/v1/load_lora_adapter",
    "/v1/unload_lora_adapter",
    "/v1/chat/completions/",
    "/v1/chat/completions#x",
    "/v1/./../sleep",
  ];

  test.each(tricks)("POST %s → 404 OpenAI-shaped, and the engine never saw it", async (path) => {
    const reply = await rawPost(path);
    expect(finalStatus(reply)).toBe(404);
    const { error } = finalBody(reply);
    expect(error).toMatchObject({ type: "invalid_request_error", code: "not_found" });
    expect(typeof error.message).toBe("string");
    const state = await simState();
    expect(unexpected(state)).toEqual([]);
    expect(state.isSleeping).toBe(false);
  });

  test("an allowed route in a roundabout form is forwarded normalised, without its query", async () => {
    const before = (await simState()).requests["POST /v1/completions"] ?? 0;
    for (const path of [
      "/v1/./completions",
      "/v1/chat/../completions",
      "/v1/%63ompletions",
      "/v1/completions?x=/../sleep",
    ]) {
      const reply = await rawPost(path);
      expect(finalStatus(reply), path).toBe(200);
    }
    const state = await simState();
    expect(state.requests["POST /v1/completions"]).toBe(before + 4);
    expect(unexpected(state)).toEqual([]);
  });

  test("a target that a URL parser reads as a host (`//`, `///`, `//[`, `//h:99999/`) is a 404, not a 500", async () => {
    // Found by an outside tester: the status page's routes read the query with `new URL(target,
    // base)`, which takes `//x` for a host and throws on one it cannot read; the client got
    // `500 internal_error: Invalid URL`.
    for (const target of [
      "//",
      "///",
      "//[",
      "//h:99999/x",
      "//%",
      "///v1:0x/chat/completions",
      "//?after=1",
    ])
      for (const method of ["GET", "POST"]) {
        const reply = await rawRequest(
          port,
          `${method} ${target} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-length: 0\r\nconnection: close\r\n\r\n`,
        );
        expect(finalStatus(reply), `${method} ${target}`).toBe(404);
        expect(finalBody(reply).error).toMatchObject({ type: "invalid_request_error", code: "not_found" });
      }
    expect(unexpected(await simState())).toEqual([]);
  });

  test("a GET on an inference route is a 405, not forwarded", async () => {
    const reply = await rawRequest(
      port,
      "GET /v1/chat/completions HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    );
    expect(finalStatus(reply)).toBe(405);
    expect(unexpected(await simState())).toEqual([]);
  });

  test("fuzzed paths: whatever the client writes, the engine sees only allowed routes", async () => {
    const pieces = [
      "v1",
      "chat",
      "completions",
      "embeddings",
      "sleep",
      "wake_up",
      "collective_rpc",
      "is_sleeping",
      "..",
      ".",
      "%2e%2e",
      "%2E",
      ".%2e",
      "%2f",
      "%2F",
      "%5c",
      "\\",
      "%00",
      "%25",
      "%252e",
      "",
      "?",
      "#",
      ";",
      "%63hat",
      "load_lora_adapter",
    ];
    const target = fc
      .array(fc.constantFrom(...pieces), { minLength: 1, maxLength: 7 })
      .map((segments) => `/v1/${segments.join("/")}`);
    let forwarded = 0;
    await fc.assert(
      fc.asyncProperty(target, async (path) => {
        const reply = await rawPost(path);
        const status = finalStatus(reply);
        // Either refused, or forwarded as the one route it normalises to (whose answer may be a
        // 400: a completions body sent to chat).
        if (checkEnginePath(path).ok) {
          forwarded++;
          expect([200, 400]).toContain(status);
        } else {
          expect(status).toBe(404);
          expect(finalBody(reply).error.code).toBe("not_found");
        }
        expect(unexpected(await simState())).toEqual([]);
      }),
      { numRuns: 150, seed: 11 },
    );
    expect(forwarded).toBeGreaterThan(0);
    expect((await simState()).isSleeping).toBe(false);
  }, 60_000);
});

describe("checkEnginePath", () => {
  test("what it accepts is an allowed route, and a URL parser resolves the raw text to that same route", () => {
    const alphabet = fc.constantFrom(
      "/",
      ".",
      "%",
      "2",
      "e",
      "E",
      "f",
      "F",
      "5",
      "c",
      "\\",
      "v",
      "1",
      "a",
      "?",
      "#",
    );
    const words = fc.constantFrom(
      "v1",
      "chat",
      "completions",
      "responses",
      "resp_1",
      "cancel",
      "sleep",
      "..",
      ".",
      "%2e",
      "%2f",
      "//",
    );
    const target = fc.oneof(
      fc.array(fc.oneof(alphabet, words), { maxLength: 20 }).map((parts) => `/${parts.join("")}`),
      fc.array(words, { maxLength: 6 }).map((parts) => `/v1/${parts.join("/")}`),
      fc.string({ unit: "binary", maxLength: 40 }).map((s) => `/v1/${s}`),
    );
    fc.assert(
      fc.property(target, (raw) => {
        const check = checkEnginePath(raw);
        if (!check.ok) return;
        const path = check.path.split("?")[0]!;
        if (check.stored) {
          // One stored response's route: its id one segment of safe characters, nothing after but cancel.
          expect(path).toMatch(/^\/v1\/responses\/[A-Za-z0-9_.~-]+(\/cancel)?$/);
          expect(path.split("/")[3]).toBe(check.stored.id);
        } else {
          expect(engineRoutes.has(path)).toBe(true);
          expect(path).toMatch(/^[a-z0-9/]+$/);
        }
        // An engine that resolves the raw text itself (WHATWG URL, as the sim does) lands on the same route.
        expect(decodeURIComponent(new URL(raw, "http://engine").pathname)).toBe(path);
      }),
      { numRuns: 5_000, seed: 11 },
    );
  });

  test("examples", () => {
    expect(checkEnginePath("/v1/chat/completions")).toEqual({ ok: true, path: "/v1/chat/completions" });
    expect(checkEnginePath("/v1/x/../embeddings?a=b")).toEqual({ ok: true, path: "/v1/embeddings" });
    expect(checkEnginePath("/v1/../sleep").ok).toBe(false);
    expect(checkEnginePath("/v1/%2e%2e/v1/completions")).toEqual({ ok: true, path: "/v1/completions" });
    expect(checkEnginePath("/v1/%zz").ok).toBe(false);
    expect(checkEnginePath("http://engine/v1/completions").ok).toBe(false);
    // A stored response's routes: the id kept, the retrieve's own parameters re-encoded, others dropped.
    expect(checkEnginePath("/v1/responses/resp_1?stream=true&starting_after=3&x=1")).toEqual({
      ok: true,
      path: "/v1/responses/resp_1?stream=true&starting_after=3",
      stored: { id: "resp_1", method: "GET", route: "/v1/responses/{response_id}" },
    });
    expect(checkEnginePath("/v1/responses/resp_1/cancel?x=1")).toEqual({
      ok: true,
      path: "/v1/responses/resp_1/cancel",
      stored: { id: "resp_1", method: "POST", route: "/v1/responses/{response_id}/cancel" },
    });
    expect(checkEnginePath("/v1/responses/resp_1/../../../sleep").ok).toBe(false);
    expect(checkEnginePath("/v1/responses/resp_1/input_items").ok).toBe(false);
    expect(checkEnginePath("/v1/responses/a%20b").ok).toBe(false);
    expect(checkEnginePath("/v1/responses/resp_1/cancel/x").ok).toBe(false);
  });
});
