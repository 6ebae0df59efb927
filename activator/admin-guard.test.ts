import type { IncomingMessage } from "node:http";
import { describe, expect, test } from "vitest";
import { adminRefusal, senderToken } from "./admin-guard.ts";

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
