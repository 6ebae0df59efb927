import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { KubeClient } from "./client.ts";
import { serviceAccountUser, TokenReviewer, tokenReviewsPath } from "./token-review.ts";

/** A stand-in API server that answers TokenReviews from a table of tokens. */
const users: Record<string, string> = {
  "activator-token": serviceAccountUser("snooze-system", "snooze-activator"),
  "autoscaler-token": serviceAccountUser("snooze-system", "snooze-autoscaler"),
  "stranger-token": serviceAccountUser("team-a", "default"),
};
let server: Server;
let client: KubeClient;
let received: { path: string; authorization?: string; token?: string; audiences?: string[] }[] = [];
let failing = false;
/** The API server takes the review and answers nothing. */
let hanging = false;
/** The API server's error for a token it does not know, when set. */
let longError: string | undefined;

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const body = JSON.parse(Buffer.concat(chunks).toString() || "{}");
    received.push({
      path: req.url ?? "",
      authorization: req.headers.authorization,
      token: body.spec?.token,
      ...(body.spec?.audiences ? { audiences: body.spec.audiences } : {}),
    });
    if (hanging) return;
    if (failing) {
      res.writeHead(403, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", reason: "Forbidden", message: "cannot create tokenreviews" }));
      return;
    }
    const username = users[body.spec?.token];
    res.writeHead(201, { "content-type": "application/json" });
    res.end(
      JSON.stringify({
        kind: "TokenReview",
        status: username
          ? { authenticated: true, user: { username, groups: ["system:serviceaccounts"] } }
          : { authenticated: false, error: longError ?? "invalid bearer token" },
      }),
    );
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  client = new KubeClient({
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token: "reviewer-own-token",
  });
});
afterAll(async () => {
  await client.close();
  server.close();
});
beforeEach(() => {
  received = [];
  failing = false;
  hanging = false;
  longError = undefined;
});

const allowed = [users["activator-token"]!, users["autoscaler-token"]!];

describe("TokenReviewer", () => {
  test("an allowed ServiceAccount's token passes, reviewed once with the reviewer's own credentials", async () => {
    const reviewer = new TokenReviewer(client, { allowed });
    expect(await reviewer.check("activator-token")).toEqual({
      ok: true,
      username: users["activator-token"],
      groups: ["system:serviceaccounts"],
    });
    expect(received).toEqual([
      { path: tokenReviewsPath, authorization: "Bearer reviewer-own-token", token: "activator-token" },
    ]);
  });

  test("with audiences, the review asks for them; without allowed, any valid token passes", async () => {
    const reviewer = new TokenReviewer(client, { audiences: ["snooze.dev/events"] });
    expect(await reviewer.check("stranger-token")).toMatchObject({
      ok: true,
      username: users["stranger-token"],
    });
    expect(received).toEqual([
      expect.objectContaining({ token: "stranger-token", audiences: ["snooze.dev/events"] }),
    ]);
    expect(await reviewer.check("forged")).toMatchObject({ ok: false, status: 401 });
  });

  test("no token is 401 without asking; a bad one 401; another ServiceAccount's 403", async () => {
    const reviewer = new TokenReviewer(client, { allowed });
    expect(await reviewer.check(undefined)).toMatchObject({ ok: false, status: 401 });
    expect(received).toEqual([]);
    const bad = await reviewer.check("forged");
    expect(bad).toMatchObject({ ok: false, status: 401 });
    expect(bad.ok ? "" : bad.message).toContain("invalid bearer token");
    const stranger = await reviewer.check("stranger-token");
    expect(stranger).toMatchObject({ ok: false, status: 403 });
    expect(stranger.ok ? "" : stranger.message).toContain("system:serviceaccount:team-a:default may not");
  });

  test("answers are cached: an accepted token for the cache time, a refused one for 10 s at most", async () => {
    let now = 1_000_000;
    const reviewer = new TokenReviewer(client, { allowed, cacheMs: 60_000, now: () => now });
    for (let i = 0; i < 5; i++) await reviewer.check("activator-token");
    for (let i = 0; i < 5; i++) await reviewer.check("forged");
    expect(reviewer.reviews).toBe(2);
    now += 11_000;
    await reviewer.check("activator-token");
    await reviewer.check("forged");
    expect(reviewer.reviews).toBe(3);
    now += 50_000;
    await reviewer.check("activator-token");
    expect(reviewer.reviews).toBe(4);
  });

  test("concurrent checks of one token share one review", async () => {
    const reviewer = new TokenReviewer(client, { allowed });
    const results = await Promise.all(Array.from({ length: 20 }, () => reviewer.check("autoscaler-token")));
    expect(results.every((r) => r.ok)).toBe(true);
    expect(reviewer.reviews).toBe(1);
  });

  test("the cache is bounded: the oldest token is asked about again", async () => {
    // Without `allowed` every valid token is accepted: three yeses for two places.
    const reviewer = new TokenReviewer(client, { maxEntries: 2 });
    await reviewer.check("activator-token");
    await reviewer.check("autoscaler-token");
    await reviewer.check("stranger-token");
    expect(reviewer.reviews).toBe(3);
    await reviewer.check("autoscaler-token");
    expect(reviewer.reviews).toBe(3);
    await reviewer.check("activator-token");
    expect(reviewer.reviews).toBe(4);
  });

  test("only so many reviews wait on the API server at once; a new token past them is 503 at once", async () => {
    // Each made-up token was a review of its own: 200 of them were 200 reviews waiting on a slow
    // API server at once (found by an outside tester).
    const reviewer = new TokenReviewer(client, { allowed, reviewTimeoutMs: 500, maxReviewsInFlight: 2 });
    hanging = true;
    const waiting = [reviewer.check("made-up-1"), reviewer.check("made-up-2")];
    expect(await reviewer.check("made-up-3")).toMatchObject({
      ok: false,
      status: 503,
      message:
        "cannot check the caller's token now: 2 reviews are already waiting on the API server, the most at once",
    });
    expect(await Promise.all(waiting)).toMatchObject([{ status: 503 }, { status: 503 }]);
    expect(received.filter((r) => r.token?.startsWith("made-up-"))).toHaveLength(2);
    // Room again once they are answered (here: given up).
    hanging = false;
    expect(await reviewer.check("activator-token")).toMatchObject({ ok: true });
  });

  test("the API server's reason for refusing a token is quoted by its start", async () => {
    // Quoted whole, a 5 MB reason (a token webhook behind the API server says what it likes) went
    // into every 401 and log line (found by an outside tester).
    const reviewer = new TokenReviewer(client, { allowed });
    longError = "e".repeat(5_000_000);
    const refused = await reviewer.check("unknown-token");
    expect(refused).toMatchObject({ ok: false, status: 401 });
    expect(refused.ok ? "" : refused.message).toMatch(/^the token is not valid: e{200}…$/);
  });

  test("refused tokens never push an accepted one out of the cache", async () => {
    // One map for both: a caller sending a few thousand made-up tokens pushed out every accepted
    // one, so the activators' next reports each waited on a TokenReview again, beside the flood's
    // (found by an outside tester).
    const reviewer = new TokenReviewer(client, { allowed, maxEntries: 2 });
    await reviewer.check("activator-token");
    for (let i = 0; i < 5; i++) await reviewer.check(`made-up-${i}`);
    const reviews = reviewer.reviews;
    expect(await reviewer.check("activator-token")).toMatchObject({ ok: true });
    expect(reviewer.reviews).toBe(reviews);
  });

  test("when the API server cannot review (no RBAC, down), callers are refused with 503 and nothing is cached", async () => {
    const reviewer = new TokenReviewer(client, { allowed });
    failing = true;
    const refused = await reviewer.check("activator-token");
    expect(refused).toMatchObject({ ok: false, status: 503 });
    expect(refused.ok ? "" : refused.message).toContain("cannot create tokenreviews");
    failing = false;
    expect(await reviewer.check("activator-token")).toMatchObject({ ok: true });
    expect(reviewer.reviews).toBe(2);
  });

  test("an API server that does not answer in time is refused with 503 saying so, not held for the client's 30 s", async () => {
    // Callers (an activator's reports, 5 s) gave up first and never heard why (found by an outside tester).
    const reviewer = new TokenReviewer(client, { allowed, reviewTimeoutMs: 200 });
    hanging = true;
    const refused = await reviewer.check("activator-token");
    expect(refused).toMatchObject({
      ok: false,
      status: 503,
      message: "cannot check the caller's token now: the API server did not answer within 0.2s",
    });
    hanging = false;
    expect(await reviewer.check("activator-token")).toMatchObject({ ok: true });
  });
});

test("KubeClient.bearerToken is the token its requests carry", async () => {
  expect(await client.bearerToken()).toBe("reviewer-own-token");
  const certOnly = new KubeClient({ server: "https://127.0.0.1:1" });
  expect(await certOnly.bearerToken()).toBeUndefined();
  await certOnly.close();
});
