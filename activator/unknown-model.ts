import { clip } from "../lib/clip.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/**
 * The `404 model_not_found` every route answers for a name no model has (`/v1/…`, `/v1/models/<id>`,
 * the admin API's `/snooze/v1/models/<id>/…`): the name as given, and the models there are, so the
 * caller sees a typo at once.
 */
export function unknownModel(name: string, known: Iterable<string>): OpenAIErrorBody {
  return openAIError(
    `The model \`${clip(name)}\` does not exist. Known models: ${[...new Set(known)].join(", ")}.`,
    "invalid_request_error",
    "model_not_found",
    "model",
  );
}
