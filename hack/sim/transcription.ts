/**
 * `/v1/audio/transcriptions` and `/v1/audio/translations` as vLLM serves them for a speech model:
 * a multipart/form-data upload with `file` and `model`, answered `{"text": ...}`, or, with the
 * form field `stream` true, as an SSE stream of `transcription.chunk` (`translation.chunk`) events
 * then `data: [DONE]`, as vLLM's speech-to-text server streams. The simulator does not listen to
 * the audio: every upload gets the same words, so a client, and Snooze in front of it, can be
 * tested end to end.
 */
import { randomUUID } from "node:crypto";
import type { ServerResponse } from "node:http";
import { type FormPart, readForm, textOf } from "../../lib/http/form.ts";
import { badRequest, modelNotFound } from "./vllm-error.ts";

export const transcriptionText = "The quick brown fox jumps over the lazy dog.";

/** Form values pydantic takes as true for a bool field, as vLLM's form parsing does (any case). */
const trueValues = new Set(["true", "1", "yes", "on", "t", "y"]);

/** The answer to an upload: its words, the model it named, and whether it asked for a stream. */
export interface Transcription {
  text: string;
  model: string;
  stream: boolean;
}

export function transcribe(
  body: Buffer,
  contentType: string | undefined,
  servedModelNames: readonly string[],
): Transcription {
  let form: FormPart[];
  try {
    form = readForm(body, contentType ?? "");
  } catch {
    throw badRequest("the body must be multipart/form-data with `file` and `model`");
  }
  const part = form.findLast((p) => p.name === "model");
  const model = part && textOf(body, part);
  if (!model) throw badRequest("`model` is required", "model");
  if (!servedModelNames.includes(model)) throw modelNotFound(model, servedModelNames);
  if (!form.some((p) => p.name === "file" && p.filename !== undefined))
    throw badRequest("`file` is required", "file");
  const stream = form.findLast((p) => p.name === "stream");
  const streamed = stream !== undefined && trueValues.has((textOf(body, stream) ?? "").toLowerCase());
  return { text: transcriptionText, model, stream: streamed };
}

/**
 * A transcription streamed as vLLM streams one: a chunk per word (`choices[0].delta.content`), the
 * last with `finish_reason`, the model as the request named it, then `[DONE]`.
 */
export function streamTranscription(
  res: ServerResponse,
  answer: Transcription,
  kind: "transcription" | "translation",
): void {
  res.writeHead(200, { "content-type": "text/event-stream; charset=utf-8", "cache-control": "no-cache" });
  const id = `${kind === "transcription" ? "trsc" : "trsl"}-${randomUUID().replaceAll("-", "")}`;
  const created = Math.floor(Date.now() / 1000);
  const words = answer.text.split(/(?= )/);
  for (const [index, word] of words.entries()) {
    const last = index === words.length - 1;
    const choice = last
      ? { delta: { content: word }, finish_reason: "stop", stop_reason: null }
      : { delta: { content: word } };
    const chunk = { id, object: `${kind}.chunk`, created, choices: [choice], model: answer.model };
    res.write(`data: ${JSON.stringify(chunk)}\n\n`);
  }
  res.end("data: [DONE]\n\n");
}
