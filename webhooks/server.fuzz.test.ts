import fc from "fast-check";
import { Agent, fetch } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { resources, review } from "../test/support/webhooks/review-fixtures.ts";
import { startTestWebhookServer } from "../test/support/webhooks/test-server.ts";
import { webhookPaths } from "./handlers.ts";
import type { WebhookServer } from "./server.ts";

/**
 * Fuzzing the running HTTPS server: malformed bodies always get 400 (never a verdict, never a 5xx);
 * well-formed reviews with random objects always get a verdict for their own uid (never a 5xx,
 * never a crash). The fake cluster has residents everywhere so the residency path runs too.
 */
let server: WebhookServer;
let dispatcher: Agent;
const cluster = new FakeClusterReader();

beforeAll(async () => {
  const { server: started, ca } = await startTestWebhookServer({
    caName: "fuzz-ca",
    deps: { cluster },
    maxBodyBytes: 256 * 1024,
    decisionTimeoutMs: 2_000,
  });
  server = started;
  dispatcher = new Agent({ connect: { ca: ca.certPem }, connections: 4 });
  cluster.slotState = async () => ({ residents: [{ kind: "Model", name: "other", tier: "ready" }] });
});

afterAll(async () => {
  await dispatcher?.close();
  await server?.close(1_000);
});

const paths = Object.values(webhookPaths);

async function send(path: string, body: string) {
  const response = await fetch(`${server.url}${path}`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json" },
    body,
  });
  return { status: response.status, text: await response.text() };
}

const valid = review({ resource: resources.models, object: { metadata: { name: "m" }, spec: {} } }) as {
  request: Record<string, unknown>;
};

/** A valid review with one required part broken: values that can never be right for that field. */
const notAString = fc.oneof(
  fc.integer(),
  fc.constant(null),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.boolean(),
);
const brokenReview = fc
  .oneof(
    fc.record({
      at: fc.constantFrom("apiVersion", "kind"),
      value: fc.oneof(notAString, fc.constantFrom("v1", "admission.k8s.io/v1beta1", "Review")),
    }),
    fc.record({ at: fc.constant("request"), value: fc.oneof(notAString, fc.constant("request")) }),
    fc.record({
      at: fc.constant("request.uid"),
      value: fc.oneof(notAString, fc.constantFrom("", " ", "a b", "x".repeat(300))),
    }),
    fc.record({
      at: fc.constant("request.operation"),
      value: fc.oneof(notAString, fc.constantFrom("PATCH", "create", "")),
    }),
    fc.record({
      at: fc.constantFrom("request.userInfo", "request.resource", "request.kind"),
      value: fc.oneof(notAString, fc.string({ maxLength: 5 })),
    }),
    fc.record({
      at: fc.constant("request.object"),
      value: fc.oneof(fc.integer(), fc.array(fc.integer()), fc.string({ maxLength: 5 })),
    }),
  )
  .map(({ at, value }) => {
    const copy = structuredClone(valid) as Record<string, unknown> & { request: Record<string, unknown> };
    const [first, second] = at.split(".") as [string, string | undefined];
    if (second === undefined) copy[first] = value;
    else copy.request[second] = value;
    return JSON.stringify(copy);
  });

const garbage = fc.oneof(
  fc.string({ maxLength: 200 }),
  fc.jsonValue({ maxDepth: 4 }).map((v) => JSON.stringify(v) ?? "null"),
  fc.uint8Array({ maxLength: 300 }).map((bytes) => Buffer.from(bytes).toString("latin1")),
  brokenReview,
);

const kubeObject = fc.dictionary(
  fc.constantFrom("metadata", "spec", "status", "apiVersion", "kind", "x"),
  fc.oneof(
    fc.jsonValue({ maxDepth: 3 }),
    fc.record({
      name: fc.string({ maxLength: 10 }),
      annotations: fc.dictionary(
        fc.constantFrom("snooze.dev/slot", "snooze.dev/sleep-after", "snooze.dev/x", "a/b"),
        fc.string({ maxLength: 8 }),
      ),
      replicas: fc.integer({ min: -2, max: 5 }),
      slot: fc.constantFrom("gpu-0", "", "s"),
      containers: fc.array(
        fc.record({
          name: fc.string({ maxLength: 5 }),
          image: fc.constantFrom("vllm", "x"),
          args: fc.array(fc.string({ maxLength: 6 })),
        }),
      ),
    }),
  ),
);

const wellFormed = fc
  .record({
    uid: fc.uuid(),
    resource: fc.constantFrom(...Object.values(resources), {
      group: "x.io",
      version: "v1",
      resource: "things",
    }),
    subResource: fc.constantFrom(undefined, "scale", "status"),
    operation: fc.constantFrom("CREATE", "UPDATE", "DELETE", "CONNECT"),
    username: fc.constantFrom(
      "alice",
      "system:serviceaccount:snooze-system:snooze-autoscaler",
      "system:kube-controller-manager",
    ),
    pod: fc.option(fc.constantFrom("as-0", "as-1")),
    object: kubeObject,
    oldObject: kubeObject,
    name: fc.option(fc.string({ maxLength: 10 }), { nil: undefined }),
  })
  .map((r) => ({
    uid: r.uid,
    body: review({
      uid: r.uid,
      resource: r.resource,
      ...(r.subResource ? { subResource: r.subResource } : {}),
      operation: r.operation as "CREATE",
      userInfo: {
        username: r.username,
        ...(r.pod ? { extra: { "authentication.kubernetes.io/pod-name": [r.pod] } } : {}),
      },
      object: r.object,
      oldObject: r.oldObject,
      ...(r.name !== undefined ? { name: r.name } : {}),
    }),
  }));

describe("fuzz", () => {
  test("malformed bodies: always 400, never a verdict", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), garbage, async (path, body) => {
        const { status, text } = await send(path, body);
        expect(status).toBe(400);
        expect(text).not.toMatch(/"allowed"\s*:\s*true/);
      }),
      { numRuns: 200 },
    );
  });

  test("well-formed reviews with random objects: a verdict for their uid, never a 5xx", async () => {
    await fc.assert(
      fc.asyncProperty(fc.constantFrom(...paths), wellFormed, async (path, { uid, body }) => {
        const { status, text } = await send(path, JSON.stringify(body));
        expect(status).toBe(200);
        const answer = JSON.parse(text) as { response: { uid: string; allowed: unknown; patch?: string } };
        expect(answer.response.uid).toBe(uid);
        expect(typeof answer.response.allowed).toBe("boolean");
        if (answer.response.patch)
          expect(Array.isArray(JSON.parse(Buffer.from(answer.response.patch, "base64").toString()))).toBe(
            true,
          );
      }),
      { numRuns: 250 },
    );
  });
});
