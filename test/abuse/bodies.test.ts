import fc from "fast-check";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { chat, simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * Fuzzed request bodies and headers against a ready sim engine: every request gets a complete
 * answer, and every error is OpenAI-shaped (`{"error":{"message","type","code"}}`), whoever gave it
 * (the activator, or the engine as vLLM would; an engine's own 404 for a route it lacks is passed on).
 */
let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`
maxBodySize: 16Ki
models:
  qwen:
    aliases: [q]
    command: ${simCommand()}
`);
  expect((await fetch(`${snooze.url}/v1/chat/completions`, chat("qwen"))).status).toBe(200);
});
afterAll(() => snooze?.close(1_000));

const json = fc.oneof(
  fc.json({ maxDepth: 3 }),
  fc
    .record(
      {
        model: fc.oneof(
          fc.constantFrom("qwen", "q", "nope", ""),
          fc.string(),
          fc.integer(),
          fc.constant(null),
        ),
        messages: fc.oneof(
          fc.array(fc.record({ role: fc.constantFrom("user", "system", "bogus"), content: fc.string() }), {
            maxLength: 3,
          }),
          fc.anything({ maxDepth: 2 }),
        ),
        prompt: fc.oneof(fc.string(), fc.array(fc.integer(), { maxLength: 5 })),
        max_tokens: fc.oneof(fc.integer({ min: -2, max: 4 }), fc.constant("3")),
        stream: fc.oneof(fc.boolean(), fc.constant("yes")),
        n: fc.integer({ min: 0, max: 2 }),
      },
      { requiredKeys: [] },
    )
    .map((value) => JSON.stringify(value)),
);
const body = fc.oneof(
  json,
  // A request the engine serves (sent as JSON, it gets a 200): vLLM, as the sim now, refuses a
  // body sent as another content type, so the fuzz alone seldom reaches an answer.
  fc.constant(JSON.stringify({ model: "qwen", messages: [{ role: "user", content: "hi" }], max_tokens: 2 })),
  fc.uint8Array({ maxLength: 512 }).map((bytes) => Buffer.from(bytes).toString("latin1")),
  fc.string({ maxLength: 64 }).map((s) => `{"model":"qwen",${s}`),
  fc.constant("x".repeat(20_000)),
);
const request = fc.record({
  path: fc.constantFrom("/v1/chat/completions", "/v1/completions", "/v1/embeddings"),
  body,
  contentType: fc.constantFrom("application/json", "text/plain", "application/x-www-form-urlencoded", ""),
  modelHeader: fc.option(fc.constantFrom("qwen", "q", "missing", " "), { nil: undefined }),
});

describe("fuzzed bodies", () => {
  test("every request is answered; every error is OpenAI-shaped", async () => {
    const seen = new Map<number, number>();
    await fc.assert(
      fc.asyncProperty(request, async ({ path, body, contentType, modelHeader }) => {
        const headers: Record<string, string> = {};
        if (contentType) headers["content-type"] = contentType;
        if (modelHeader) headers["snooze-model"] = modelHeader;
        const response = await fetch(`${snooze.url}${path}`, {
          method: "POST",
          headers,
          body,
          signal: AbortSignal.timeout(10_000),
        });
        const text = await response.text();
        seen.set(response.status, (seen.get(response.status) ?? 0) + 1);
        expect([200, 400, 404, 413, 422]).toContain(response.status);
        if (response.status !== 200) {
          const parsed = JSON.parse(text);
          if (parsed.detail !== undefined && response.status === 404) {
            // A route the engine does not serve (the sim has no embeddings): FastAPI's own 404, passed on.
            expect(path).toBe("/v1/embeddings");
            return;
          }
          expect(typeof parsed.error?.message, text).toBe("string");
          expect(typeof parsed.error?.type, text).toBe("string");
          expect("code" in parsed.error, text).toBe(true);
        } else if (response.headers.get("content-type")?.includes("event-stream")) {
          expect(text.trim().endsWith("data: [DONE]")).toBe(true);
        } else JSON.parse(text);
      }),
      { numRuns: 200, seed: 11 },
    );
    // The fuzz reached both the engine and the activator's own refusals.
    expect(seen.get(200) ?? 0).toBeGreaterThan(0);
    expect(seen.get(400) ?? 0).toBeGreaterThan(0);
  }, 60_000);
});
