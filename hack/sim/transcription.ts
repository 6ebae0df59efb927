/**
 * `/v1/audio/transcriptions` and `/v1/audio/translations` as vLLM serves them for a speech model:
 * a multipart/form-data upload with `file` and `model`, answered `{"text": ...}`. The simulator
 * does not listen to the audio: every upload gets the same words, so a client, and Snooze in
 * front of it, can be tested end to end.
 */
import { parseForm } from "../../lib/http/form.ts";
import { badRequest, modelNotFound } from "./vllm-error.ts";

export const transcriptionText = "The quick brown fox jumps over the lazy dog.";

export async function transcribe(
  body: Buffer,
  contentType: string | undefined,
  servedModelNames: readonly string[],
): Promise<{ text: string }> {
  let form: FormData;
  try {
    form = await parseForm(body, contentType ?? "");
  } catch {
    throw badRequest("the body must be multipart/form-data with `file` and `model`");
  }
  const model = form.get("model");
  if (typeof model !== "string" || !model) throw badRequest("`model` is required", "model");
  if (!servedModelNames.includes(model)) throw modelNotFound(model);
  if (!(form.get("file") instanceof Blob)) throw badRequest("`file` is required", "file");
  return { text: transcriptionText };
}
