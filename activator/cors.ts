import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { clip } from "../lib/clip.ts";
import { sameOrigin } from "../lib/http/same-origin.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";
import { isLoopbackHostHeader } from "./admin-guard.ts";

/**
 * Cross-origin browser access to the OpenAI API (`/v1/`), as vLLM's `--allowed-origins` gives it:
 * a chat page served from another origin sends a JSON POST, which the browser only sends after a
 * preflight (`OPTIONS` with `Access-Control-Request-Method`) that the activator answers itself, for
 * the engine may be asleep and no model is named yet. Off unless origins are allowed (`--allowed-origins`):
 * a page elsewhere could otherwise wake and use the machine's models. The admin API never takes part
 * (admin-guard.ts refuses cross-origin requests there).
 */
export class CorsPolicy {
  private readonly any: boolean;
  private readonly origins: ReadonlySet<string>;

  /** `*` allows every origin; otherwise origins as a browser sends them (`https://chat.example.com`). */
  constructor(allowed: readonly string[]) {
    this.any = allowed.includes("*");
    this.origins = new Set(allowed.filter((origin) => origin !== "*"));
  }

  get enabled(): boolean {
    return this.any || this.origins.size > 0;
  }

  /** The `Access-Control-Allow-Origin` a request from `origin` gets; undefined: none (not allowed). */
  allowOrigin(origin: string | undefined): string | undefined {
    if (origin === undefined) return undefined;
    if (this.any) return "*";
    return this.origins.has(origin) ? origin : undefined;
  }

  /** A browser's preflight: an OPTIONS that names the method it wants to send. */
  static isPreflight(method: string | undefined, headers: IncomingHttpHeaders): boolean {
    return (
      method === "OPTIONS" &&
      headers.origin !== undefined &&
      headers["access-control-request-method"] !== undefined
    );
  }

  /**
   * Why a request to `/v1/` from a browser page of another origin is refused before anything runs;
   * undefined when it may go on (no browser, this server's own page, an allowed origin). The
   * preflight alone does not keep pages out: one may POST without asking when its body has a form's
   * content type or none (`fetch` with `no-cors`, a Blob body), the activator reads any body as JSON,
   * and what the engine does with it (start, wake, generate) is done before the browser hides the
   * answer. A request that is not a browser's carries neither `Origin` nor `Sec-Fetch-Site`.
   */
  refusal(headers: IncomingHttpHeaders): OpenAIErrorBody | undefined {
    const origin = headers.origin;
    if (origin !== undefined) {
      if (this.allowOrigin(origin)) return undefined;
      // This server's own page, at a loopback name only: a page elsewhere can point its own name at
      // this machine (DNS rebinding) and so be same-origin to the browser. Another name is trusted
      // once listed, as any origin.
      if (sameOrigin(origin, headers.host))
        return this.trustedName(headers.host) ? undefined : rebound(origin, origin, "origin");
      return refused(origin);
    }
    // A browser sends Origin with every CORS request, so an allowed page's request has one; without
    // it (a no-cors GET: an image, a link prefetch) the site cannot be checked against the list.
    const site = headers["sec-fetch-site"];
    if ((site === "cross-site" || site === "same-site") && !this.any)
      return refused(`a ${site} page`, "sec-fetch-site");
    // A same-origin GET carries no Origin: its page is at the name in Host, trusted as above (at a
    // loopback name, or when an allowed origin has that name); a rebound page's `/v1/models` would
    // otherwise still be answered, and count as a hint that prewarms.
    if (site === "same-origin" && !this.any && !this.trustedName(headers.host))
      return rebound(String(headers.host), "naming that origin", "host");
    return undefined;
  }

  /** Whether a page at `host` (a Host header) is trusted: a loopback name, or an allowed origin's. */
  private trustedName(host: string | undefined): boolean {
    if (isLoopbackHostHeader(host)) return true;
    for (const origin of this.origins) if (sameOrigin(origin, host)) return true;
    return false;
  }

  /**
   * The answer to a preflight: 204 with what the browser may send (any header it asked for: an API
   * key in `Authorization`, the SDKs' `x-stainless-*`), or 403 saying how to allow the origin.
   */
  preflight(
    headers: IncomingHttpHeaders,
  ): { status: 204; headers: Record<string, string> } | { status: 403; body: OpenAIErrorBody } {
    const origin = String(headers.origin);
    const allowed = this.allowOrigin(origin);
    if (!allowed) return { status: 403, body: refused(origin) };
    const asked = headers["access-control-request-headers"];
    return {
      status: 204,
      headers: {
        "access-control-allow-origin": allowed,
        "access-control-allow-methods": "GET, POST, OPTIONS",
        ...(asked ? { "access-control-allow-headers": String(asked) } : {}),
        "access-control-max-age": "600",
        vary: "Origin, Access-Control-Request-Headers",
      },
    };
  }
}

/**
 * The 403's body for a page of this server's own origin (or, with no Origin, its Host: `pages`) at a
 * name that is not loopback; `allow` says what to pass to --allowed-origins.
 */
function rebound(pages: string, allow: string, param: "origin" | "host"): OpenAIErrorBody {
  return openAIError(
    `Requests from pages of ${clip(pages)} are not allowed: a page of this server's own name is trusted only at a loopback name (localhost, 127.0.0.1, [::1]), since any page can point its name at this machine. Start Snooze with --allowed-origins ${clip(allow)} to allow it.`,
    "permission_error",
    "cross_origin_refused",
    param,
  );
}

/**
 * The 403's body for a page of `origin` that is not allowed: it says how to allow it. `param` names
 * the header that told the page's site: `Origin`, or `Sec-Fetch-Site` when there was no Origin.
 */
function refused(origin: string, param: "origin" | "sec-fetch-site" = "origin"): OpenAIErrorBody {
  const shown = clip(origin);
  const named = shown.startsWith("a ") ? "its origin" : shown;
  return openAIError(
    `Cross-origin requests from ${shown} are not allowed: start Snooze with --allowed-origins ${named} (or * for any origin).`,
    "permission_error",
    "cross_origin_refused",
    param,
  );
}

/**
 * An engine's answer headers for a response that carries Snooze's CORS answer (set by server.ts):
 * the engine's own `Access-Control-*` go (the browser must see one answer, and Snooze's follows
 * `--allowed-origins`), and its `Vary`, which replaces Snooze's, keeps naming `Origin`.
 */
export function replaceEngineCors(out: OutgoingHttpHeaders): void {
  for (const name of Object.keys(out)) if (name.startsWith("access-control-")) delete out[name];
  if (out.vary === undefined) return;
  const vary = String(out.vary);
  if (!/(^|,)\s*(origin|\*)\s*(,|$)/i.test(vary)) out.vary = `${vary}, Origin`;
}

/**
 * `--allowed-origins`' value: origins separated by commas (`*` for any), each as a browser sends it
 * (scheme, host and port, no path); an error names the first that is not one.
 */
export function parseAllowedOrigins(
  text: string,
): { ok: true; origins: string[] } | { ok: false; message: string } {
  const origins = text
    .split(",")
    .map((origin) => origin.trim())
    .filter(Boolean);
  for (const origin of origins) {
    if (origin === "*") continue;
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {
      url = undefined;
    }
    if (!url || !/^https?:$/.test(url.protocol) || url.origin !== origin)
      return {
        ok: false,
        message: `\`${origin}\` is not an origin: write it as a browser sends it, scheme, host and port only (https://chat.example.com, http://localhost:3000), or * for any`,
      };
  }
  return { ok: true, origins };
}
