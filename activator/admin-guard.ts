import type { IncomingMessage } from "node:http";
import { isIP } from "node:net";
import { bearerToken, sameSecret } from "../lib/http/bearer.ts";
import { sameOrigin } from "../lib/http/same-origin.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

/** Why an admin or events request is refused: the status, an OpenAI-shaped body, extra headers. */
export interface AdminRefusal {
  status: number;
  body: OpenAIErrorBody;
  headers?: Record<string, string>;
}

/** Content types a browser may send cross-origin without a preflight (an HTML form, `fetch` no-cors). */
const formTypes = new Set(["application/x-www-form-urlencoded", "multipart/form-data", "text/plain"]);

/**
 * Whether `host` (a bind address or the host part of a Host header) is this machine's loopback:
 * `localhost` (also written fully qualified, `localhost.`, RFC 6761 §6.3), 127.0.0.0/8, `::1` or an
 * IPv4-mapped 127 address, in dotted form or in the hex form a URL parser gives it
 * (`::ffff:7f00:1`: a Host `[::ffff:127.0.0.1]` reaches this check so; found by an outside tester,
 * refused before). `0.0.0.0`, `::` and every other address are not: they are reachable from
 * elsewhere.
 */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (name === "localhost" || name === "localhost.") return true;
  if (isIP(name) === 4) return name.startsWith("127.");
  if (isIP(name) === 6)
    return name === "::1" || name === "0:0:0:0:0:0:0:1" || /^::ffff:(127\.|7f[0-9a-f]{2}:)/.test(name);
  return false;
}

/** The host name of a Host header (`127.0.0.1:8080`, `[::1]:8080`, `localhost`), without the port. */
function hostName(header: string): string | undefined {
  try {
    return new URL(`http://${header}`).hostname;
  } catch {
    return undefined;
  }
}

/** Whether a Host header (`localhost:8080`, `[::1]:8080`) names this machine's loopback. */
export function isLoopbackHostHeader(header: string | undefined): boolean {
  const name = header === undefined ? undefined : hostName(header);
  return name !== undefined && isLoopbackHost(name);
}

const refusal = (
  status: number,
  message: string,
  type: string,
  code: string,
  headers?: Record<string, string>,
  param: string | null = null,
): AdminRefusal => ({
  status,
  body: openAIError(message, type, code, param),
  ...(headers ? { headers } : {}),
});

/** Whether a request is an event delivery, `POST /snooze/v1/events`. */
export function isEventDelivery(req: IncomingMessage): boolean {
  return req.method === "POST" && (req.url ?? "").split("?")[0] === "/snooze/v1/events";
}

/**
 * The bearer of an event delivery that is not the admin token, when the activator takes senders'
 * own tokens (`senders`, event-senders.ts): the events endpoint checks it once it knows what the
 * events ask. Undefined for any other request, and for the admin token itself.
 */
export function senderToken(
  req: IncomingMessage,
  token: string | undefined,
  senders: boolean,
): string | undefined {
  if (!senders || token === undefined || !isEventDelivery(req)) return undefined;
  const given = bearerToken(req.headers);
  return given !== undefined && !sameSecret(given, token) ? given : undefined;
}

/**
 * The checks every request to the admin API and the events endpoint (`/snooze/...`) passes before
 * it is routed; undefined when it may go on.
 *
 * - A browser's cross-origin request is refused (403): an `Origin` that is not this server's own
 *   (`Origin` must match `Host`), or `Sec-Fetch-Site` saying another site. No CORS header is ever
 *   sent, so no page elsewhere may read an answer either.
 * - Without a token (only allowed on a loopback bind) the `Host` must be a loopback name too (403):
 *   a page whose own name was re-pointed at 127.0.0.1 (DNS rebinding) is same-origin to the
 *   browser, but its Host header still carries that name.
 * - With a token, `Authorization: Bearer <token>` must carry it (401; compared in constant time),
 *   or, on an event delivery when `senders` is set, a sender's own token (checked later).
 * - A POST with a form content type (`application/x-www-form-urlencoded`, `multipart/form-data`,
 *   `text/plain`: what a page may send without asking) is refused (415).
 */
export function adminRefusal(
  req: IncomingMessage,
  token: string | undefined,
  senders = false,
): AdminRefusal | undefined {
  const origin = req.headers.origin;
  const host = req.headers.host;
  if (origin !== undefined && !sameOrigin(origin, host))
    return refusal(
      403,
      `Cross-origin requests to the admin API are refused: Origin ${JSON.stringify(origin)} does not match Host ${JSON.stringify(host ?? "")}.`,
      "permission_error",
      "cross_origin_refused",
      undefined,
      "origin",
    );
  const site = req.headers["sec-fetch-site"];
  if (site === "cross-site" || site === "same-site")
    return refusal(
      403,
      `Cross-origin requests to the admin API are refused (Sec-Fetch-Site: ${site}).`,
      "permission_error",
      "cross_origin_refused",
      undefined,
      "sec-fetch-site",
    );
  if (token === undefined) {
    if (!isLoopbackHostHeader(host))
      return refusal(
        403,
        `Without an admin token the admin API answers only requests to a loopback name (localhost, 127.0.0.1, [::1]), not Host ${JSON.stringify(host ?? "")}.`,
        "permission_error",
        "host_not_loopback",
        undefined,
        "host",
      );
  } else {
    const given = bearerToken(req.headers);
    if (given === undefined || (!sameSecret(given, token) && !senderToken(req, token, senders)))
      return refusal(
        401,
        given === undefined
          ? "The admin API needs the admin token: send Authorization: Bearer <token> (the snooze commands read $SNOOZE_ADMIN_TOKEN or --admin-token-file)."
          : "The admin token is not valid.",
        "authentication_error",
        given === undefined ? "missing_admin_token" : "invalid_admin_token",
        { "www-authenticate": 'Bearer realm="snooze-admin"' },
        "authorization",
      );
  }
  const contentType = String(req.headers["content-type"] ?? "")
    .split(";")[0]!
    .trim()
    .toLowerCase();
  if (req.method === "POST" && formTypes.has(contentType)) {
    const events = isEventDelivery(req);
    return refusal(
      415,
      events
        ? `The events endpoint does not take content-type ${contentType} (a form content type, which a web page may send cross-origin): send a binary-mode event's data as application/json (or no body), or the event as application/cloudevents+json, or a batch as application/cloudevents-batch+json.`
        : `The admin API does not take content-type ${contentType} (a form content type, which a web page may send cross-origin): send application/json or no body.`,
      "invalid_request_error",
      "unsupported_media_type",
      undefined,
      "content-type",
    );
  }
  return undefined;
}
