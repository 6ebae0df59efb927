import { once } from "node:events";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { subjectAccessReviewsPath } from "../lib/kube/access-review.ts";
import { KubeClient } from "../lib/kube/client.ts";
import { serviceAccountUser, tokenReviewsPath } from "../lib/kube/token-review.ts";
import { KubeEventSenders } from "./kube-event-senders.ts";

/**
 * A stand-in API server: TokenReviews from a table of tokens (each valid for one audience), and
 * SubjectAccessReviews from a table of grants. The real API server's answers to both are checked by
 * test/e2e/kube-scaling.test.ts ("an event sender's own Kubernetes token").
 */
const trigger = serviceAccountUser("team-a", "oidc-eventing.knative.dev-trigger-prewarm");
/** A token shaped as the API server's are (a JWT; the signature is the stand-in's business). */
const jwt = (claims: Record<string, unknown>) =>
  ["e30", Buffer.from(JSON.stringify(claims)).toString("base64url"), "c2ln"].join(".");
const hour = () => Math.floor(Date.now() / 1_000) + 3_600;
const triggerToken = jwt({ aud: ["snooze.dev/events"], exp: hour(), sub: trigger });
/** Claims the events audience, but the API server does not know it: forged. */
const forgedToken = jwt({ aud: ["snooze.dev/events"], exp: hour(), sub: trigger, forged: true });
const tokens: Record<string, { username: string; audience: string }> = {
  [triggerToken]: { username: trigger, audience: "snooze.dev/events" },
};
/** `user verb namespace/name` a RoleBinding would allow. */
let grants = new Set<string>();
let failing = false;
/** SubjectAccessReviews are taken and never answered. */
let accessHangs = false;
let received: { path: string; spec: any }[] = [];
let server: Server;
let client: KubeClient;

beforeAll(async () => {
  server = createServer(async (req, res) => {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const { spec } = JSON.parse(Buffer.concat(chunks).toString());
    received.push({ path: req.url ?? "", spec });
    if (accessHangs && req.url === subjectAccessReviewsPath) return;
    if (failing) {
      res.writeHead(403, { "content-type": "application/json" });
      res.end(JSON.stringify({ kind: "Status", reason: "Forbidden", message: "RBAC missing" }));
      return;
    }
    let status: unknown;
    if (req.url === tokenReviewsPath) {
      const known = tokens[spec.token];
      status =
        known && spec.audiences?.includes(known.audience)
          ? { authenticated: true, user: { username: known.username, groups: ["system:serviceaccounts"] } }
          : { authenticated: false, error: "token audiences are invalid for the target audiences" };
    } else {
      const { verb, namespace, name } = spec.resourceAttributes;
      status = { allowed: grants.has(`${spec.user} ${verb} ${namespace}/${name}`) };
    }
    res.writeHead(201, { "content-type": "application/json" });
    res.end(JSON.stringify({ status }));
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  client = new KubeClient({
    server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    token: "own",
  });
});
afterAll(async () => {
  await client.close();
  server.close();
});
beforeEach(() => {
  grants = new Set();
  failing = false;
  accessHangs = false;
  received = [];
});

const senders = () =>
  new KubeEventSenders({
    client,
    audience: "snooze.dev/events",
    modelObjectOf: (model) => (model === "qwen" ? { namespace: "team-a", name: "qwen" } : undefined),
  });

describe("KubeEventSenders", () => {
  test("a token for the events audience whose user RBAC lets do the verb on the Model passes", async () => {
    grants.add(`${trigger} prewarm team-a/qwen`);
    expect(
      await senders()
        .delivery(triggerToken)
        .authorize([{ verb: "prewarm", model: "qwen" }]),
    ).toBeUndefined();
    expect(received).toEqual([
      { path: tokenReviewsPath, spec: { token: triggerToken, audiences: ["snooze.dev/events"] } },
      {
        path: subjectAccessReviewsPath,
        spec: {
          user: trigger,
          groups: ["system:serviceaccounts"],
          resourceAttributes: {
            group: "snooze.dev",
            resource: "models",
            verb: "prewarm",
            namespace: "team-a",
            name: "qwen",
          },
        },
      },
    ]);
  });

  test("another verb than the one granted is 403, saying which Role would let it", async () => {
    grants.add(`${trigger} prewarm team-a/qwen`);
    const refused = await senders()
      .delivery(triggerToken)
      .authorize([
        { verb: "prewarm", model: "qwen" },
        { verb: "stop", model: "qwen" },
      ]);
    expect(refused?.status).toBe(403);
    expect(refused?.body.error.code).toBe("sender_not_allowed");
    expect(refused?.body.error.message).toBe(
      `${trigger} may not stop models.snooze.dev team-a/qwen. To let it, bind it a Role in team-a with the rule apiGroups: [snooze.dev], resources: [models], verbs: [stop] (resourceNames: [qwen] for this Model alone).`,
    );
  });

  test("a token the API server says is not valid is 401, saying which audience it must be for", async () => {
    const refused = await senders()
      .delivery(forgedToken)
      .authorize([{ verb: "wake", model: "qwen" }]);
    expect(refused?.status).toBe(401);
    expect(refused?.body.error.code).toBe("invalid_sender_token");
    expect(refused?.body.error.message).toContain("issued for the audience snooze.dev/events");
    expect(refused?.body.error.message).toContain("token audiences are invalid");
    expect(refused?.headers?.["www-authenticate"]).toContain("Bearer");
    // Nothing asked of RBAC for a sender not known.
    expect(received.map((r) => r.path)).toEqual([tokenReviewsPath]);
  });

  test("who sends is asked first (before the body is read), once per delivery", async () => {
    grants.add(`${trigger} wake team-a/qwen`);
    const delivery = senders().delivery(triggerToken);
    expect(await delivery.authenticate()).toBeUndefined();
    expect(received.map((r) => r.path)).toEqual([tokenReviewsPath]);
    expect(await delivery.authorize([{ verb: "wake", model: "qwen" }])).toBeUndefined();
    expect(received.map((r) => r.path)).toEqual([tokenReviewsPath, subjectAccessReviewsPath]);
    const stranger = await senders().delivery(forgedToken).authenticate();
    expect(stranger?.status).toBe(401);
  });

  test("what cannot be a token for the audience is 401 without asking the API server", async () => {
    const s = senders();
    for (const [token, why] of [
      ["made-up", "it is not a JWT"],
      [
        jwt({ aud: ["https://kubernetes.default.svc"], exp: hour() }),
        "it is issued for https://kubernetes.default.svc",
      ],
      [jwt({ aud: "snooze.dev/events", exp: Math.floor(Date.now() / 1_000) - 1 }), "it has expired"],
    ] as const) {
      const refused = await s.delivery(token).authorize([{ verb: "wake", model: "qwen" }]);
      expect(refused?.status).toBe(401);
      expect(refused?.body.error.message).toContain(why);
    }
    expect(received).toEqual([]);
  });

  test("the same verb on the same Model twice in a batch is asked once; answers are cached", async () => {
    grants.add(`${trigger} wake team-a/qwen`);
    const s = senders();
    const twice = [
      { verb: "wake" as const, model: "qwen" },
      { verb: "wake" as const, model: "qwen" },
    ];
    expect(await s.delivery(triggerToken).authorize(twice)).toBeUndefined();
    expect(await s.delivery(triggerToken).authorize(twice)).toBeUndefined();
    expect(received.length).toBe(2);
  });

  test("when the API server cannot answer (RBAC missing, down): 503 with Retry-After, never let through", async () => {
    failing = true;
    const s = senders();
    const refused = await s.delivery(triggerToken).authorize([{ verb: "wake", model: "qwen" }]);
    expect(refused?.status).toBe(503);
    expect(refused?.body.error.code).toBe("sender_check_unavailable");
    expect(refused?.headers?.["retry-after"]).toBe("5");
    // Not remembered: asked again at once once the API server answers.
    failing = false;
    grants.add(`${trigger} wake team-a/qwen`);
    expect(await s.delivery(triggerToken).authorize([{ verb: "wake", model: "qwen" }])).toBeUndefined();
  });

  test("an API server that does not answer in time: 503 saying so, not held for the client's 30 s", async () => {
    accessHangs = true;
    const s = new KubeEventSenders({
      client,
      audience: "snooze.dev/events",
      modelObjectOf: () => ({ namespace: "team-a", name: "qwen" }),
      reviewTimeoutMs: 200,
    });
    const refused = await s.delivery(triggerToken).authorize([{ verb: "wake", model: "qwen" }]);
    expect(refused?.status).toBe(503);
    expect(refused?.body.error.message).toBe(
      `cannot ask the API server whether ${trigger} may wake now: the API server did not answer within 0.2s`,
    );
  });
});
