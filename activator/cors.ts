import type { IncomingHttpHeaders, OutgoingHttpHeaders } from "node:http";
import { clip } from "../lib/clip.ts";
import { type OpenAIErrorBody, openAIError } from "../lib/openai-error.ts";

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
   * The answer to a preflight: 204 with what the browser may send (any header it asked for: an API
   * key in `Authorization`, the SDKs' `x-stainless-*`), or 403 saying how to allow the origin.
   */
  preflight(
    headers: IncomingHttpHeaders,
  ): { status: 204; headers: Record<string, string> } | { status: 403; body: OpenAIErrorBody } {
    const origin = String(headers.origin);
    const allowed = this.allowOrigin(origin);
    if (!allowed) {
      const shown = clip(origin);
      return {
        status: 403,
        body: openAIError(
          `Cross-origin requests from ${shown} are not allowed: start Snooze with --allowed-origins ${shown} (or * for any origin).`,
          "permission_error",
          "cross_origin_refused",
        ),
      };
    }
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
