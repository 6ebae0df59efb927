import { describe, expect, test } from "vitest";
import { CorsPolicy, parseAllowedOrigins, replaceEngineCors } from "./cors.ts";

const preflight = (origin: string, extra: Record<string, string> = {}) => ({
  origin,
  "access-control-request-method": "POST",
  ...extra,
});

describe("cross-origin access to /v1/", () => {
  test("listed origins get themselves back, * gets *, others and no origin get nothing", () => {
    const listed = new CorsPolicy(["https://chat.example.com"]);
    expect(listed.enabled).toBe(true);
    expect(listed.allowOrigin("https://chat.example.com")).toBe("https://chat.example.com");
    expect(listed.allowOrigin("https://evil.example")).toBeUndefined();
    expect(listed.allowOrigin(undefined)).toBeUndefined();
    expect(new CorsPolicy(["*"]).allowOrigin("https://anyone.example")).toBe("*");
    const none = new CorsPolicy([]);
    expect(none.enabled).toBe(false);
    expect(none.allowOrigin("https://chat.example.com")).toBeUndefined();
  });

  test("a request that skips the preflight: refused from another origin, not from this server's page or a non-browser", () => {
    const none = new CorsPolicy([]);
    const host = "127.0.0.1:8080";
    // curl, SDKs: neither header.
    expect(none.refusal({ host })).toBeUndefined();
    // The status page of this very server (same origin), and a browser's own navigation.
    expect(none.refusal({ host, origin: "http://127.0.0.1:8080" })).toBeUndefined();
    expect(none.refusal({ host, "sec-fetch-site": "same-origin" })).toBeUndefined();
    expect(none.refusal({ host, "sec-fetch-site": "none" })).toBeUndefined();
    // A page elsewhere: a no-cors POST carries its Origin; a no-cors GET only Sec-Fetch-Site.
    expect(none.refusal({ host, origin: "https://evil.example" })).toMatchObject({
      error: {
        code: "cross_origin_refused",
        param: "origin",
        message:
          "Cross-origin requests from https://evil.example are not allowed: start Snooze with --allowed-origins https://evil.example (or * for any origin).",
      },
    });
    expect(none.refusal({ host, origin: "null" })?.error.code).toBe("cross_origin_refused");
    expect(none.refusal({ host, "sec-fetch-site": "cross-site" })?.error).toMatchObject({
      code: "cross_origin_refused",
      param: "sec-fetch-site",
    });
    expect(none.refusal({ host, "sec-fetch-site": "same-site" })?.error.code).toBe("cross_origin_refused");
    // Allowed origins go on; * lets every page in.
    const listed = new CorsPolicy(["https://chat.example.com"]);
    expect(listed.refusal({ host, origin: "https://chat.example.com" })).toBeUndefined();
    expect(listed.refusal({ host, origin: "https://evil.example" })?.error.code).toBe("cross_origin_refused");
    expect(new CorsPolicy(["*"]).refusal({ host, "sec-fetch-site": "cross-site" })).toBeUndefined();
  });

  test("a page of this server's own origin is trusted at a loopback name only: elsewhere it may be a rebound name", () => {
    // Found by an outside tester: `Host: attacker.example:8080` with the same Origin (a page whose
    // name was pointed at 127.0.0.1) was taken for this server's own page and answered.
    const none = new CorsPolicy([]);
    for (const host of ["localhost:8080", "127.0.0.1:8080", "[::1]:8080"])
      expect(none.refusal({ host, origin: `http://${host}` })).toBeUndefined();
    const rebound = none.refusal({ host: "attacker.example:8080", origin: "http://attacker.example:8080" });
    expect(rebound?.error).toMatchObject({ code: "cross_origin_refused", param: "origin" });
    expect(rebound?.error.message).toContain("--allowed-origins http://attacker.example:8080");
    // ...and its same-origin GET, which carries no Origin (a listing counts as a prewarm hint).
    const get = none.refusal({ host: "attacker.example:8080", "sec-fetch-site": "same-origin" });
    expect(get?.error).toMatchObject({ code: "cross_origin_refused", param: "host" });
    expect(none.refusal({ host: "localhost:8080", "sec-fetch-site": "same-origin" })).toBeUndefined();
    // A chat page served by a reverse proxy under the same name is allowed once listed.
    const listed = new CorsPolicy(["https://llm.example.com"]);
    expect(listed.refusal({ host: "llm.example.com", origin: "https://llm.example.com" })).toBeUndefined();
    expect(listed.refusal({ host: "llm.example.com", "sec-fetch-site": "same-origin" })).toBeUndefined();
  });

  test("a preflight is an OPTIONS naming a method, from a page", () => {
    expect(CorsPolicy.isPreflight("OPTIONS", preflight("https://a.example"))).toBe(true);
    expect(CorsPolicy.isPreflight("OPTIONS", { origin: "https://a.example" })).toBe(false);
    expect(CorsPolicy.isPreflight("POST", preflight("https://a.example"))).toBe(false);
  });

  test("an allowed preflight may send the headers it asked for; a refused one says how to allow it", () => {
    const policy = new CorsPolicy(["https://chat.example.com"]);
    expect(
      policy.preflight(
        preflight("https://chat.example.com", {
          "access-control-request-headers": "authorization,content-type",
        }),
      ),
    ).toEqual({
      status: 204,
      headers: {
        "access-control-allow-origin": "https://chat.example.com",
        "access-control-allow-methods": "GET, POST, OPTIONS",
        "access-control-allow-headers": "authorization,content-type",
        "access-control-max-age": "600",
        vary: "Origin, Access-Control-Request-Headers",
      },
    });
    const refused = policy.preflight(preflight("https://evil.example"));
    expect(refused).toMatchObject({
      status: 403,
      body: { error: { type: "permission_error", code: "cross_origin_refused", param: "origin" } },
    });
    if (refused.status === 403)
      expect(refused.body.error.message).toContain("--allowed-origins https://evil.example");
  });

  test("--allowed-origins takes origins as browsers send them, or *", () => {
    expect(parseAllowedOrigins(" https://a.example , http://localhost:3000,*")).toEqual({
      ok: true,
      origins: ["https://a.example", "http://localhost:3000", "*"],
    });
    expect(parseAllowedOrigins("")).toEqual({ ok: true, origins: [] });
    for (const bad of ["a.example", "https://a.example/", "https://a.example/chat", "ftp://a.example"]) {
      const parsed = parseAllowedOrigins(bad);
      expect(parsed.ok, bad).toBe(false);
      if (!parsed.ok) expect(parsed.message).toContain(`\`${bad}\` is not an origin`);
    }
  });

  test("the engine's own CORS headers give way to Snooze's, and its Vary keeps naming Origin", () => {
    const out: Record<string, string> = {
      "content-type": "application/json",
      "access-control-allow-origin": "*",
      "access-control-allow-credentials": "true",
      vary: "Accept-Encoding",
    };
    replaceEngineCors(out);
    expect(out).toEqual({ "content-type": "application/json", vary: "Accept-Encoding, Origin" });
    for (const vary of ["Origin", "accept-encoding, origin", "*"]) {
      const kept = { vary };
      replaceEngineCors(kept);
      expect(kept.vary).toBe(vary);
    }
    const none: Record<string, string> = {};
    replaceEngineCors(none);
    expect(none).toEqual({});
  });
});
