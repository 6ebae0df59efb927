import type { IncomingMessage, ServerResponse } from "node:http";
import { clip } from "../clip.ts";
import { openAIError } from "../openai-error.ts";
import { unreadBodyHeaders } from "./continue.ts";
import { sendError } from "./json.ts";

/**
 * Refuses (415) a body sent compressed: Snooze reads JSON bodies as they are, and neither it nor
 * vLLM's server decompresses one, so a gzipped body would otherwise be read as garbage. `what` names
 * the body in the message ("request body", "event"). True when it answered.
 */
export function refuseEncodedBody(req: IncomingMessage, res: ServerResponse, what: string): boolean {
  const encoding = req.headers["content-encoding"]?.trim().toLowerCase();
  if (!encoding || encoding === "identity") return false;
  sendError(
    res,
    415,
    openAIError(
      `The ${what} is sent with Content-Encoding: ${clip(encoding)}; Snooze reads the JSON body as it is and does not decompress it. Send it uncompressed.`,
      "invalid_request_error",
      "unsupported_content_encoding",
    ),
    unreadBodyHeaders(req),
  );
  return true;
}
