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
