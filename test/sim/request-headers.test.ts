/**
 * Headers as vLLM's server reads and writes them: JSON routes take only application/json, and
 * with --enable-request-id-headers every answer carries X-Request-Id.
 */
import { describe, expect, test } from "vitest";
import { parseCommandArgs } from "../../cli/command.ts";
import { simCommand } from "../../cli/sim.ts";
import { parseSimFlags } from "../../hack/sim/options.ts";
import { chat, sim } from "./helpers.ts";

const unsupported = {
  error: {
    message: "1 validation error:\n  Unsupported Media Type: Only 'application/json' is allowed",
    type: "Bad Request",
    param: null,
    code: 400,
  },
};

async function send(url: string, path: string, body: string, contentType?: string) {
  const response = await fetch(`${url}${path}`, {
    method: "POST",
    headers: contentType === undefined ? {} : { "content-type": contentType },
    // Bytes, so fetch adds no Content-Type of its own (a string gets text/plain).
    body: Buffer.from(body),
  });
  return { status: response.status, json: (await response.json()) as any };
}

describe("request headers", () => {
  test("a JSON body sent as text/plain, or without a Content-Type, is refused as vLLM's dependency refuses it", async () => {
    const engine = await sim();
    const body = JSON.stringify(chat("sim-model", { max_tokens: 1 }));
    for (const path of ["/v1/chat/completions", "/v1/completions", "/v1/responses"]) {
      expect(await send(engine.url, path, body, "text/plain")).toEqual({ status: 400, json: unsupported });
      expect(await send(engine.url, path, body)).toEqual({ status: 400, json: unsupported });
    }
    // application/json with parameters is JSON.
    expect(
      (await send(engine.url, "/v1/chat/completions", body, "Application/JSON; charset=utf-8")).status,
    ).toBe(200);
    // FastAPI reads a body without a Content-Type as JSON first: one that is not JSON is json_invalid.
    const notJson = await send(engine.url, "/v1/chat/completions", "{nope");
    expect(notJson.json.error.message).toContain("json_invalid");
  });

  test("--enable-request-id-headers: X-Request-Id on every answer, the request's own or a new one; off by default", async () => {
    const plain = await sim();
    expect((await fetch(`${plain.url}/health`)).headers.get("x-request-id")).toBeNull();
    const engine = await sim({ requestIdHeaders: true });
    const own = await fetch(`${engine.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json", "x-request-id": "abc-123" },
      body: JSON.stringify(chat("sim-model", { max_tokens: 1 })),
    });
    expect(own.headers.get("x-request-id")).toBe("abc-123");
    expect(((await own.json()) as { id: string }).id).toBe("chatcmpl-abc-123");
    const fresh = (await fetch(`${engine.url}/health`)).headers.get("x-request-id");
    expect(fresh).toMatch(/^[0-9a-f]{32}$/);
    const { values, positionals, tokens } = parseCommandArgs(simCommand, ["--enable-request-id-headers"]);
    expect(parseSimFlags(values, positionals, tokens).engine.requestIdHeaders).toBe(true);
  });
});
