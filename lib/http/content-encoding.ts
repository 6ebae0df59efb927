import type { IncomingMessage, ServerResponse } from "node:http";
import { clip } from "../clip.ts";
import { openAIError } from "../openai-error.ts";
import { sendError } from "./json.ts";

/** A `Content-Encoding` header's coding, lower-cased; undefined for none (absent or `identity`). */
export function contentCoding(header: string | undefined): string | undefined {
  const coding = header?.trim().toLowerCase();
  return !coding || coding === "identity" ? undefined : coding;
}

/**
 * Refuses (415) a body sent compressed: Snooze reads JSON bodies as they are, and neither it nor
 * vLLM's server decompresses one, so a gzipped body would otherwise be read as garbage; a transfer
 * coding besides chunked likewise (501). `what` names the body in the message ("request body",
 * "event"). The status it answered with, if it did.
 */
export function refuseEncodedBody(
  req: IncomingMessage,
  res: ServerResponse,
  what: string,
): number | undefined {
  // A transfer coding besides chunked (`gzip, chunked`): Node takes the chunks off and leaves the
  // rest, so the body would be read still compressed. RFC 9112 §6.1: a coding not understood is 501.
  const transfer = req.headers["transfer-encoding"]?.toLowerCase();
  const codings = transfer?.split(",").map((c) => c.trim()) ?? [];
  if (codings.some((c) => c !== "chunked")) {
    sendError(
      res,
      501,
      openAIError(
        `The ${what} is sent with Transfer-Encoding: ${clip(transfer!)}; Snooze understands only chunked. Send it uncompressed.`,
        "invalid_request_error",
        "unsupported_transfer_encoding",
      ),
      { connection: "close" },
    );
    return 501;
  }
  const encoding = contentCoding(req.headers["content-encoding"]);
  if (!encoding) return undefined;
  sendError(
    res,
    415,
    openAIError(
      `The ${what} is sent with Content-Encoding: ${clip(encoding)}; Snooze reads the JSON body as it is and does not decompress it. Send it uncompressed.`,
      "invalid_request_error",
      "unsupported_content_encoding",
    ),
  );
  return 415;
}
