import type { IncomingMessage, ServerResponse } from "node:http";
import { clip } from "../clip.ts";
import { openAIError } from "../openai-error.ts";
import { sendError } from "./json.ts";

/**
 * A `Content-Encoding` header's codings, lower-cased, as one list (`gzip, br`: applied in that
 * order); undefined for none (absent, or only `identity`). The header may come on several lines (a
 * sidecar adding one to an engine's), which undici gives as an array: RFC 9110 §5.3 reads them as
 * one list (before, an array failed Snooze's own code, a `502` "header?.trim is not a function" for
 * an answer that was fine; found by an outside tester).
 */
export function contentCoding(header: string | string[] | undefined): string | undefined {
  if (header === undefined) return undefined;
  const codings = String(header)
    .split(",")
    .map((coding) => coding.trim().toLowerCase())
    .filter((coding) => coding !== "" && coding !== "identity");
  return codings.length === 0 ? undefined : codings.join(", ");
}

/**
 * A `Transfer-Encoding` header's coding names, lower-cased and without their parameters
 * (`gzip;q=1`), in the order applied; empty for none. Several lines (an array) are one list.
 */
export function transferCodings(header: string | string[] | undefined): string[] {
  if (header === undefined) return [];
  return String(header)
    .toLowerCase()
    .split(",")
    .map((coding) => coding.split(";")[0]!.trim());
}

/** The transfer codings RFC 9112 §7 registers besides chunked (and their `x-` aliases): compressions. */
const compressions = new Set(["gzip", "x-gzip", "deflate", "compress", "x-compress"]);

/** `identity` or a name nothing defines, told as such (RFC 2616 had `identity`; RFC 7230 removed it). */
const notDefined = (coding: string) =>
  `${clip(coding, 40)} is not a transfer coding HTTP/1.1 defines${coding === "identity" ? " (RFC 2616's, removed since)" : ""}`;

/**
 * Refuses (415) a body sent compressed: Snooze reads JSON bodies as they are, and neither it nor
 * vLLM's server decompresses one, so a gzipped body would otherwise be read as garbage. A transfer
 * coding besides chunked likewise: before chunked (`gzip, chunked`) Node takes the chunks off and
 * leaves the rest, so the body would be read still compressed; RFC 9112 §6.1: a coding not
 * understood is 501. Without chunked last (`identity`, `gzip`) the body's length cannot be read at
 * all: §6.3 says 400 and close, as Node's parser does for such a request on any other route (its
 * code, `malformed_request`). The message names the coding for what it is: a compression Snooze
 * does not decode, or (`identity`) no transfer coding at all. `what` names the body in the message
 * ("request body", "event"). The status it answered with, if it did.
 */
export function refuseEncodedBody(
  req: IncomingMessage,
  res: ServerResponse,
  what: string,
): number | undefined {
  const transfer = req.headers["transfer-encoding"]?.toLowerCase();
  const codings = transferCodings(transfer);
  if (codings.length > 0 && codings.at(-1) !== "chunked") {
    const unknown = codings.find((c) => c !== "chunked" && !compressions.has(c));
    sendError(
      res,
      400,
      openAIError(
        `The request is not well-formed HTTP/1.1: its Transfer-Encoding (${clip(transfer!)}) does not end with chunked, so the body's length cannot be read (RFC 9112 §6.3)${unknown === undefined ? "" : `; and ${notDefined(unknown)}`}. Send the body with Content-Length, or with Transfer-Encoding: chunked alone.`,
        "invalid_request_error",
        "malformed_request",
      ),
      { connection: "close" },
    );
    return 400;
  }
  const other = codings.find((c) => c !== "chunked");
  if (other !== undefined) {
    const unknown = codings.find((c) => c !== "chunked" && !compressions.has(c));
    sendError(
      res,
      501,
      openAIError(
        unknown === undefined
          ? `The ${what} is sent with Transfer-Encoding: ${clip(transfer!)}; Snooze decodes only the chunked transfer coding, not ${clip(other, 40)}. Send the body uncompressed, with Transfer-Encoding: chunked alone or with Content-Length.`
          : `The ${what} is sent with Transfer-Encoding: ${clip(transfer!)}; ${notDefined(unknown)}, and Snooze decodes only chunked. Send the body with Transfer-Encoding: chunked alone, or with Content-Length.`,
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
      "content-encoding",
    ),
  );
  return 415;
}
