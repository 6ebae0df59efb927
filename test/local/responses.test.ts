import OpenAI from "openai";
import { afterEach, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * The Responses API through the activator, with the openai SDK as a client calls it: routed by the
 * body's model (an alias renamed), held through a cold start with its stream's progress comments
 * (`streamProgress`), and a start that fails told inside the stream the SDK reads.
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

const client = (url: string) => new OpenAI({ baseURL: `${url}/v1`, apiKey: "none", maxRetries: 0 });

test("a response and a streamed one from a cold model, named by alias", async () => {
  snooze = await startWith(`
models:
  qwen:
    aliases: [chat]
    streamProgress: true
    command: ${simCommand(["--load-time", "1500ms"], 1)}
`);
  // Held past a second: hold progress opens the stream and sends comments the SDK skips.
  const stream = await client(snooze.url).responses.create({ model: "chat", input: "hi", stream: true });
  const types: string[] = [];
  let completed: OpenAI.Responses.Response | undefined;
  for await (const event of stream) {
    types.push(event.type);
    if (event.type === "response.completed") completed = event.response;
  }
  expect(types[0]).toBe("response.created");
  expect(types.at(-1)).toBe("response.completed");
  // The engine serves `qwen` only: the alias reached it renamed, or it would have answered 404.
  expect(completed).toMatchObject({ model: "qwen", status: "completed" });
  const response = await client(snooze.url).responses.create({ model: "chat", input: "hi" });
  expect(response.output_text.length).toBeGreaterThan(0);
  expect(response.model).toBe("qwen");
});

test("a streamed response held for a start that fails: the SDK's stream throws the activation's error", async () => {
  snooze = await startWith(`
models:
  broken:
    streamProgress: true
    command: [sh, -c, "sleep 1.5; echo no weights here >&2; exit 3", "\${PORT}"]
`);
  const stream = await client(snooze.url).responses.create({ model: "broken", input: "hi", stream: true });
  const read = async () => {
    for await (const _event of stream);
  };
  const error = await read().then(
    () => undefined,
    (thrown: unknown) => thrown,
  );
  expect(error).toBeInstanceOf(OpenAI.APIError);
  expect((error as InstanceType<typeof OpenAI.APIError>).message).toMatch(/start of broken failed/);
});

test("a stored response's retrieve and cancel reach the engine that made it, named by no model", async () => {
  snooze = await startWith(`
models:
  qwen:
    command: ${simCommand(["--load-time", "100ms"], 0.01)}
    env: { VLLM_ENABLE_RESPONSES_API_STORE: "1" }
  other:
    command: ${simCommand(["--load-time", "100ms"], 0.01)}
`);
  const sdk = client(snooze.url);
  const made = await sdk.responses.create({ model: "qwen", input: "hi" });
  // Learned from the answer: routed to qwen, whose engine kept it.
  expect((await sdk.responses.retrieve(made.id)).output_text).toBe(made.output_text);
  const queued = await sdk.responses.create({ model: "qwen", input: "hi", background: true });
  await expect(sdk.responses.cancel(made.id)).rejects.toMatchObject({ status: 400 });
  expect(["queued", "in_progress", "completed"]).toContain((await sdk.responses.retrieve(queued.id)).status);
  // An id Snooze never passed on: a 404 that says how to name the model.
  const unknown = await fetch(`${snooze.url}/v1/responses/resp_never`);
  expect(unknown.status).toBe(404);
  const { error } = (await unknown.json()) as { error: { code: string; param: string; message: string } };
  expect(error).toMatchObject({ code: "response_not_found", param: "response_id" });
  expect(error.message).toContain("snooze-model");
  // Named by the header, it goes to that model's engine, which answers for itself.
  const named = await fetch(`${snooze.url}/v1/responses/resp_never`, { headers: { "snooze-model": "qwen" } });
  expect(named.status).toBe(404);
  expect(((await named.json()) as { error: { message: string } }).error.message).toBe(
    "Response with id 'resp_never' not found.",
  );
  // Wrong methods name the route, never the id.
  const wrong = await fetch(`${snooze.url}/v1/responses/${made.id}`, { method: "PUT" });
  expect(wrong.status).toBe(405);
  expect(wrong.headers.get("allow")).toBe("GET");
  // Once the engine is stopped its responses are gone: told at once, the model not started again.
  expect((await fetch(`${snooze.url}/snooze/v1/models/qwen/stop`, { method: "POST" })).status).toBe(200);
  const gone = await fetch(`${snooze.url}/v1/responses/${made.id}`);
  expect(gone.status).toBe(404);
  expect(((await gone.json()) as { error: { message: string } }).error.message).toMatch(/has stopped since/);
  const state = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as {
    models: { id: string; tier: string }[];
  };
  expect(state.models.find((m) => m.id === "qwen")?.tier).toBe("cold");
});
