import OpenAI, { toFile } from "openai";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { transcriptionText } from "../../hack/sim/transcription.ts";
import { simCommand, startWith } from "../helpers/local-snooze.ts";

/**
 * Audio uploads (multipart/form-data, the model in a form field) through the activator, with the
 * openai SDK as a client sends them: routed by the `model` field, an alias renamed in the form the
 * engine gets; and a JSON body sent with curl's default form Content-Type is told what to send.
 */
let snooze: LocalSnooze;
beforeAll(async () => {
  snooze = await startWith(`
models:
  whisper:
    aliases: [stt]
    command: ${simCommand()}
`);
});
afterAll(() => snooze.close(1_000));

const wav = () =>
  toFile(Buffer.from("RIFF\u0000\u0000\u0000\u0000WAVEfmt "), "hello.wav", { type: "audio/wav" });

test("a transcription and a translation by the openai SDK: routed by the form's model, an alias renamed", async () => {
  const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
  const byId = await client.audio.transcriptions.create({ model: "whisper", file: await wav() });
  expect(byId.text).toBe(transcriptionText);
  // The engine serves `whisper` only: the alias reaches it renamed, or it would answer 404.
  const byAlias = await client.audio.translations.create({ model: "stt", file: await wav() });
  expect(byAlias.text).toBe(transcriptionText);
  await expect(
    client.audio.transcriptions.create({ model: "nope", file: await wav() }),
  ).rejects.toMatchObject({
    status: 404,
    code: "model_not_found",
  });
});

test("a streamed transcription (`stream: true`): SSE chunks, as vLLM streams them", async () => {
  // The sim answered plain JSON to `stream: true`, which vLLM answers with a stream.
  const client = new OpenAI({ baseURL: `${snooze.url}/v1`, apiKey: "none", maxRetries: 0 });
  const stream = await client.audio.transcriptions.create({
    model: "stt",
    file: await wav(),
    stream: true,
  });
  const chunks: { object: string; model: string; choices: { delta: { content: string } }[] }[] = [];
  for await (const chunk of stream) chunks.push(chunk as unknown as (typeof chunks)[number]);
  expect(chunks.length).toBeGreaterThan(1);
  expect(chunks.every((chunk) => chunk.object === "transcription.chunk" && chunk.model === "whisper")).toBe(
    true,
  );
  expect(chunks.map((chunk) => chunk.choices[0]!.delta.content).join("")).toBe(transcriptionText);
});

test("a form that is not one, and a JSON body sent as a form: 400s saying what is wrong", async () => {
  const broken = await fetch(`${snooze.url}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { "content-type": "multipart/form-data; boundary=nothere" },
    body: "--elsewhere\r\n",
  });
  expect(broken.status).toBe(400);
  expect(((await broken.json()) as { error: { code: string } }).error.code).toBe("invalid_form");
  // What `curl -d '{"model": ...}'` sends without -H 'Content-Type: application/json'.
  const asForm = await fetch(`${snooze.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/x-www-form-urlencoded" },
    body: JSON.stringify({ model: "whisper", messages: [{ role: "user", content: "hi" }] }),
  });
  expect(asForm.status).toBe(400);
  const { error } = (await asForm.json()) as { error: { code: string; message: string } };
  expect(error.code).toBe("unsupported_media_type");
  expect(error.message).toContain("application/x-www-form-urlencoded");
});

test("a form with no boundary is a form that cannot be read; of two `model` fields the last routes it, as the engine reads it", async () => {
  // Found by an outside tester: the first was told to send JSON instead; the second went by the
  // first field while vLLM's form parser reads the last.
  const bare = await fetch(`${snooze.url}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { "content-type": "multipart/form-data" },
    body: "--x\r\n",
  });
  expect(bare.status).toBe(400);
  expect(((await bare.json()) as { error: { code: string } }).error.code).toBe("invalid_form");
  const form = new FormData();
  form.append("model", "nope");
  form.append("model", "stt");
  form.append("file", new Blob([Buffer.from("RIFF\u0000\u0000\u0000\u0000WAVEfmt ")]), "hello.wav");
  const twice = await fetch(`${snooze.url}/v1/audio/transcriptions`, { method: "POST", body: form });
  expect(twice.status).toBe(200);
  expect(((await twice.json()) as { text: string }).text).toBe(transcriptionText);
});

test("a filename with an escaped quote, as Go's mime/multipart writes it, is routed by alias and read by the engine", async () => {
  // Found by an outside tester: the proxy's form parser refused it (`invalid_form`); vLLM reads it.
  const boundary = "go-b0undary";
  const body = Buffer.from(
    `--${boundary}\r\nContent-Disposition: form-data; name="file"; filename="say \\"hi\\".wav"\r\n` +
      `Content-Type: application/octet-stream\r\n\r\nRIFF\u0000\u0000\u0000\u0000WAVEfmt \r\n` +
      `--${boundary}\r\nContent-Disposition: form-data; name="model"\r\n\r\nstt\r\n--${boundary}--\r\n`,
    "latin1",
  );
  const answer = await fetch(`${snooze.url}/v1/audio/transcriptions`, {
    method: "POST",
    headers: { "content-type": `multipart/form-data; boundary=${boundary}` },
    body,
  });
  expect(answer.status).toBe(200);
  expect(((await answer.json()) as { text: string }).text).toBe(transcriptionText);
});
