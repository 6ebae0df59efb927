import { clip } from "../clip.ts";
import { type OpenAIErrorBody, openAIError } from "../openai-error.ts";

/**
 * A percent-encoded path segment (a model's name in `/v1/models/{name}`), decoded; undefined when
 * its escapes are malformed (`%ZZ`, a cut UTF-8 sequence), which `decodeURIComponent` throws on:
 * the caller answers 400 (`malformedSegment`), not the 500 of an exception.
 */
export function decodeSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The 400's body for such a segment, as the client wrote it (kept short). */
export function malformedSegment(segment: string): OpenAIErrorBody {
  return openAIError(
    `The path segment \`${clip(segment, 100)}\` has a malformed percent-escape.`,
    "invalid_request_error",
    "invalid_path",
  );
}
