import type { IncomingMessage } from "node:http";
import { describe, expect, test } from "vitest";
import { adminRefusal, isLoopbackHost, isLoopbackHostHeader, senderToken } from "./admin-guard.ts";

/** The parts of a request the guard reads. */
const request = (method: string, url: string, headers: Record<string, string> = {}) =>
  ({ method, url, headers: { host: "snooze-activator.snooze-system.svc", ...headers } }) as IncomingMessage;
const bearer = (token: string) => ({ authorization: `Bearer ${token}`, "content-type": "application/json" });

describe("a token of the sender's own on an event delivery (event-senders.ts)", () => {
  test("passes the guard only when the activator takes senders' tokens, and only on POST /snooze/v1/events", () => {
    const delivery = request("POST", "/snooze/v1/events", bearer("trigger-oidc-token"));
    expect(adminRefusal(delivery, "admin-token", true)).toBeUndefined();
    expect(senderToken(delivery, "admin-token", true)).toBe("trigger-oidc-token");
    // Without senders: the admin token or nothing, as before.
    expect(adminRefusal(delivery, "admin-token", false)?.status).toBe(401);
    expect(senderToken(delivery, "admin-token", false)).toBeUndefined();
    // Any other admin route still needs the admin token.
    for (const other of [
      request("POST", "/snooze/v1/models/qwen/stop", bearer("trigger-oidc-token")),
      request("GET", "/snooze/v1/events/stream", bearer("trigger-oidc-token")),
      request("GET", "/snooze/v1/events", bearer("trigger-oidc-token")),
    ]) {
      expect(adminRefusal(other, "admin-token", true)?.body.error.code).toBe("invalid_admin_token");
      expect(senderToken(other, "admin-token", true)).toBeUndefined();
    }
  });

  test("no bearer at all is still 401; the admin token itself is no sender's token", () => {
    const none = request("POST", "/snooze/v1/events", { "content-type": "application/json" });
    expect(adminRefusal(none, "admin-token", true)?.body.error.code).toBe("missing_admin_token");
    const admin = request("POST", "/snooze/v1/events", bearer("admin-token"));
    expect(adminRefusal(admin, "admin-token", true)).toBeUndefined();
    expect(senderToken(admin, "admin-token", true)).toBeUndefined();
  });

  test("the guard's other checks still apply to a sender: a form content type is 415", () => {
    const form = request("POST", "/snooze/v1/events?x=1", {
      authorization: "Bearer trigger-oidc-token",
      "content-type": "text/plain",
    });
    expect(adminRefusal(form, "admin-token", true)?.status).toBe(415);
  });
});

test("a Host header names the loopback in every spelling a local client sends, and nothing else does", () => {
  for (const host of [
    "localhost",
    "LOCALHOST:8080",
    "localhost.:8080",
    "127.0.0.1:8080",
    "127.1",
    "127.0.0.1.",
    "[::1]:8080",
    "[0:0:0:0:0:0:0:1]",
    "[::ffff:127.0.0.1]:8080",
    "[::ffff:127.255.255.255]",
  ])
    expect([host, isLoopbackHostHeader(host)]).toEqual([host, true]);
  for (const host of [
    undefined,
    "",
    "evil.example",
    "localhost.evil.example",
    "localhost..",
    "127.0.0.1.evil.example",
    "0.0.0.0",
    "[::]",
    "[::ffff:10.0.0.1]",
    "[::ffff:a00:1]",
    "[::ffff:8000:1]",
  ])
    expect([host, isLoopbackHostHeader(host)]).toEqual([host, false]);
});

test("a bind address is the loopback as written on the command line", () => {
  for (const host of ["localhost", "127.0.0.1", "::1", "[::1]", "::ffff:127.0.0.1"])
    expect(isLoopbackHost(host)).toBe(true);
  for (const host of ["0.0.0.0", "::", "192.168.1.2", "::ffff:192.168.1.2"])
    expect(isLoopbackHost(host)).toBe(false);
});

describe("each refusal names the header it is about (param), as /v1/'s errors name their field", () => {
  test("Origin, Sec-Fetch-Site, Host and Authorization", () => {
    const host = "127.0.0.1:8080";
    const refused = (headers: Record<string, string>, token?: string) =>
      adminRefusal(request("GET", "/snooze/v1/models", { host, ...headers }), token)?.body.error;
    expect(refused({ origin: "https://evil.example" })).toMatchObject({
      code: "cross_origin_refused",
      param: "origin",
    });
    expect(refused({ "sec-fetch-site": "cross-site" })).toMatchObject({
      code: "cross_origin_refused",
      param: "sec-fetch-site",
    });
    expect(refused({ host: "attacker.example:8080" })).toMatchObject({
      code: "host_not_loopback",
      param: "host",
    });
    expect(refused({}, "admin-token")).toMatchObject({ code: "missing_admin_token", param: "authorization" });
    expect(refused({ authorization: "Bearer wrong" }, "admin-token")).toMatchObject({
      code: "invalid_admin_token",
      param: "authorization",
    });
  });
});
