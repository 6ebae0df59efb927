/**
 * `/v1/audio/transcriptions` and `/v1/audio/translations` as vLLM serves them for a speech model:
 * a multipart/form-data upload with `file` and `model`, answered `{"text": ...}`. The simulator
 * does not listen to the audio: every upload gets the same words, so a client, and Snooze in
 * front of it, can be tested end to end.
 */
import { type FormPart, readForm, textOf } from "../../lib/http/form.ts";
import { badRequest, modelNotFound } from "./vllm-error.ts";

export const transcriptionText = "The quick brown fox jumps over the lazy dog.";

export function transcribe(
  body: Buffer,
  contentType: string | undefined,
  servedModelNames: readonly string[],
): { text: string } {
  let form: FormPart[];
  try {
    form = readForm(body, contentType ?? "");
  } catch {
    throw badRequest("the body must be multipart/form-data with `file` and `model`");
  }
  const part = form.findLast((p) => p.name === "model");
  const model = part && textOf(body, part);
  if (!model) throw badRequest("`model` is required", "model");
  if (!servedModelNames.includes(model)) throw modelNotFound(model);
  if (!form.some((p) => p.name === "file" && p.filename !== undefined))
    throw badRequest("`file` is required", "file");
  return { text: transcriptionText };
}
