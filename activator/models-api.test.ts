import { afterEach, expect, test } from "vitest";
import {
  finalBody,
  finalStatus,
  rawRequest,
  startActivator,
  type TestActivator,
} from "../test/abuse/harness.ts";

/** `/v1/models` and `/v1/models/{model}`, and naming a model by the `snooze-model` header. */
let snooze: TestActivator | undefined;
afterEach(async () => {
  await snooze?.close();
  snooze = undefined;
});

test("/v1/models takes GET and HEAD: another method is a 405 with Allow", async () => {
  // Found by an outside tester: `PUT /v1/models` was a 404 not_found.
  snooze = await startActivator();
  for (const [method, path] of [
    ["PUT", "/v1/models"],
    ["POST", "/v1/models"],
    ["DELETE", "/v1/models/m"],
    ["PATCH", "/v1/models/"],
  ] as const) {
    const answer = await fetch(`${snooze.url}${path}`, {
      method,
      body: method === "DELETE" ? undefined : "{}",
    });
    expect(answer.status).toBe(405);
    expect(answer.headers.get("allow")).toBe("GET, HEAD");
    expect(((await answer.json()) as { error: { code: string } }).error.code).toBe("method_not_allowed");
  }
});

test("GET /v1/models/ says the path names no model, not that a model `` does not exist", async () => {
  // Found by an outside tester.
  snooze = await startActivator();
  const answer = await fetch(`${snooze.url}/v1/models/`);
  expect(answer.status).toBe(400);
  const { error } = (await answer.json()) as { error: { code: string; message: string } };
  expect(error.code).toBe("missing_model");
  expect(error.message).toMatch(/^The path names no model/);
  expect((await fetch(`${snooze.url}/v1/models/m`)).status).toBe(200);
});

test("two snooze-model headers: a 400 naming the header, not a lookup of both joined", async () => {
  // Found by an outside tester: Node joined them (`m, nope`), looked up as one name: a 404.
  snooze = await startActivator();
  const body = '{"prompt":"hi"}';
  const reply = await rawRequest(
    snooze.port,
    `POST /v1/completions HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\nsnooze-model: m\r\nSnooze-Model: nope\r\ncontent-length: ${body.length}\r\n\r\n`,
    body,
  );
  expect(finalStatus(reply)).toBe(400);
  expect(finalBody(reply).error).toMatchObject({
    code: "duplicate_header",
    param: "snooze-model",
    message: expect.stringContaining("`snooze-model`"),
  });
});

test("an OpenAI route without /v1 (a client's base URL missing it) is a 404 that says where the routes are", async () => {
  // Found by an outside tester: OpenAI's SDKs with base_url http://host:port showed only
  // "No route for POST /chat/completions."
  snooze = await startActivator();
  for (const [method, path, meant] of [
    ["POST", "/chat/completions", "/v1/chat/completions"],
    ["POST", "/responses", "/v1/responses"],
    ["GET", "/models", "/v1/models"],
    ["GET", "/models/m", "/v1/models/m"],
  ] as const) {
    const answer = await fetch(`${snooze.url}${path}`, {
      method,
      ...(method === "POST"
        ? { headers: { "content-type": "application/json" }, body: '{"model":"m"}' }
        : {}),
    });
    expect(answer.status).toBe(404);
    const { error } = (await answer.json()) as { error: { code: string; message: string } };
    expect(error.code).toBe("not_found");
    expect(error.message).toContain(`did you mean ${method} ${meant}?`);
    expect(error.message).toContain("base URL ends in /v1");
  }
  // Other paths keep the plain answer.
  const other = await fetch(`${snooze.url}/nothing`);
  expect(((await other.json()) as { error: { message: string } }).error.message).toBe(
    "No route for GET /nothing.",
  );
});

test("a model name close to an id or alias gets a 404 saying which one it likely meant, on every route", async () => {
  // Found by an outside tester: a typo got only the list of ids, which names no alias.
  snooze = await startActivator({ id: "m", aliases: ["qwen3-8b"] }, { aliases: ["qwen3-8b"] });
  const meant = async (answer: Response) => {
    expect(answer.status).toBe(404);
    const { error } = (await answer.json()) as { error: { code: string; param: string; message: string } };
    expect(error).toMatchObject({ code: "model_not_found", param: "model" });
    return error.message;
  };
  const chat = (model: string) =>
    fetch(`${snooze!.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, messages: [] }),
    });
  expect(await meant(await chat("Qwen3-8B"))).toBe(
    "The model `Qwen3-8B` does not exist; did you mean `qwen3-8b`? Known models: `m`.",
  );
  expect(await meant(await fetch(`${snooze.url}/v1/models/qwen3-8`))).toContain("did you mean `qwen3-8b`?");
  expect(
    await meant(await fetch(`${snooze.url}/snooze/v1/models/qwen-3-8b/stop`, { method: "POST" })),
  ).toContain("did you mean `qwen3-8b`?");
  expect(await meant(await chat("mistral"))).toBe("The model `mistral` does not exist. Known models: `m`.");
  expect(snooze.plane.demands).toEqual([]);
});
