import { clip } from "../lib/clip.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";
import { closestKey } from "../lib/settings/suggest.ts";

/** Names listed in an answer at most; a config of thousands of models is summed up past them. */
const listedAtMost = 50;

/**
 * The known models as an answer lists them: each quoted (an id may hold a comma or a space), at most
 * `listedAtMost`, then how many more; "none" when there are none.
 */
export function knownModels(known: Iterable<string>): string {
  const ids = [...new Set(known)];
  if (ids.length === 0) return "none";
  const listed = ids.slice(0, listedAtMost).map((id) => `\`${clip(id)}\``);
  const more = ids.length - listed.length;
  return `${listed.join(", ")}${more > 0 ? ` and ${more} more (GET /v1/models lists them)` : ""}`;
}

/** Names longer than this are not compared (each comparison costs the product of two lengths). */
const comparedAtMost = 128;

/**
 * The name among `names` that `name` most likely meant (`Qwen3-8B`, `qwen3-8`, `lama` for an alias
 * `llama`), as the settings' own keys are suggested; only names longer than none compared.
 */
export function meantModel(name: string, names: Iterable<string>): string | undefined {
  if (name.length > comparedAtMost) return undefined;
  return closestKey(
    name,
    [...names].filter((other) => other.length <= comparedAtMost),
  );
}

/**
 * The `404 model_not_found` every route answers for a name no model has (`/v1/…`, `/v1/models/<id>`,
 * the admin API's `/snooze/v1/models/<id>/…`): the name as given, the one it most likely meant among
 * `names` (ids and aliases; by default `known`), and the models there are, so the caller sees a typo
 * at once. Found by an outside tester: `qwen3-8` or `Qwen3-8B` got only the list, which names no
 * alias and stops at 50 models, where `snooze wake` already said "did you mean".
 */
export function unknownModel(
  name: string,
  known: Iterable<string>,
  names?: Iterable<string>,
): OpenAIErrorBody {
  // `known` may be an iterator (a Map's keys), read once.
  const ids = [...known];
  const near = meantModel(name, names ?? ids);
  return openAIError(
    `The model \`${clip(name)}\` does not exist${near === undefined ? "." : `; did you mean \`${clip(near)}\`?`} Known models: ${knownModels(ids)}.`,
    "invalid_request_error",
    "model_not_found",
    "model",
  );
}

/**
 * The `404 model_not_found` a held request is answered when its model is removed while it waits
 * (its Model deleted): a request that came a moment later would be told the model is unknown.
 */
export function removedWhileHeld(name: string, known: Iterable<string>): OpenAIErrorBody {
  return openAIError(
    `The model \`${clip(name)}\` was removed while the request was held; nothing serves it here any more. Known models: ${knownModels(known)}.`,
    "invalid_request_error",
    "model_not_found",
    "model",
  );
}

/**
 * The `404 model_not_found` a person's sleep or stop answers when a reload took its model out of
 * the settings (removed or renamed) while the action waited: the removal stops its engine.
 */
export function removedModel(name: string, verb: string, known: Iterable<string>): OpenAIErrorBody {
  return openAIError(
    `The model \`${clip(name)}\` was taken out of the settings (a reload removed or renamed it) while its ${verb} was under way; the removal stops its engine. Known models: ${knownModels(known)}.`,
    "invalid_request_error",
    "model_not_found",
    "model",
  );
}
