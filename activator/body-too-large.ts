import { formatSize } from "../lib/format-size.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/**
 * The `413 request_too_large` of a request body over what the activator reads: its size as a person
 * reads it, and the setting that sets it, `maxBodySize`, or `maxHeldBytes` when that is the smaller
 * (a body larger than all that may be held at once could never be held). Found by an outside tester:
 * "the request body is larger than the limit of 33554432 bytes" named no setting to raise.
 */
export function bodyTooLarge(maxBodySize: number, maxHeldBytes: number): OpenAIErrorBody {
  const held = maxHeldBytes < maxBodySize;
  const limit = held ? maxHeldBytes : maxBodySize;
  const setting = held
    ? "`maxHeldBytes`, the request body bytes Snooze keeps at once for all requests"
    : "`maxBodySize`, the largest request body Snooze reads";
  return openAIError(
    `The request body is larger than ${formatSize(limit)} (${limit} bytes): ${setting}. Send a smaller body, or raise the setting.`,
    "invalid_request_error",
    "request_too_large",
  );
}
