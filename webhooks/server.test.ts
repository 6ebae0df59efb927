import { setTimeout as sleep } from "node:timers/promises";
import { connect } from "node:tls";
import { Registry } from "prom-client";
import { Agent, fetch } from "undici";
import { afterAll, afterEach, beforeAll, describe, expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { lintExposition } from "../test/support/promlint.ts";
import { FakeClusterReader } from "../test/support/webhooks/fake-cluster.ts";
import { FakeLeases, fakeClaims } from "../test/support/webhooks/fake-leases.ts";
import { resources, review, scaleFromZero } from "../test/support/webhooks/review-fixtures.ts";
import { type CertificatePem, createCA, issueServingCert } from "./certs/x509.ts";
import type { JsonPatch } from "./json-patch.ts";
import { webhookMetrics } from "./metrics.ts";
import { applyPatch } from "./patch-builder.ts";
import { startWebhookServer, type WebhookServer } from "./server.ts";

const validity = () => ({
  notBefore: new Date(Date.now() - 60_000),
  notAfter: new Date(Date.now() + 3_600_000),
});
let ca: CertificatePem;
let serving: CertificatePem;
let server: WebhookServer;
let registry: Registry;
let dispatcher: Agent;
let ready = true;
const cluster = new FakeClusterReader();
const leases = new FakeLeases();

beforeAll(async () => {
  ca = await createCA("test-ca", validity());
  serving = await issueServingCert(ca, ["127.0.0.1", "localhost"], validity());
  registry = new Registry();
  server = await startWebhookServer({
    host: "127.0.0.1",
    port: 0,
    tls: serving,
    deps: {
      cluster,
      autoscaler: {
        username: "system:serviceaccount:snooze-system:snooze-autoscaler",
        leaseNamespace: "snooze-system",
      },
      claims: fakeClaims(leases),
    },
    registry,
    metrics: webhookMetrics(registry),
    log: silentLogger,
    maxBodyBytes: 64 * 1024,
    maxJsonValues: 5_000,
    decisionTimeoutMs: 300,
    ready: () => ready,
  });
  dispatcher = new Agent({ connect: { ca: ca.certPem } });
});

afterAll(async () => {
  await dispatcher?.close();
  await server?.close(1_000);
});

afterEach(() => {
  cluster.failReads = undefined;
  ready = true;
});

const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
  fetch(`${server.url}${path}`, {
    method: "POST",
    dispatcher,
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });

async function answer(path: string, body: unknown) {
  const response = await post(path, body);
  expect(response.status).toBe(200);
  const json = (await response.json()) as { response: Record<string, unknown> };
  return json.response as {
    uid: string;
    allowed: boolean;
    status?: { code: number; message: string; reason: string };
    patch?: string;
    patchType?: string;
    warnings?: string[];
  };
}

describe("admission reviews over HTTPS", () => {
  test("a Model with a bad setting is denied with the field, value and allowed form", async () => {
    const body = review({
      resource: resources.models,
      object: {
        metadata: { name: "qwen" },
        spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "q" }, sleepAfter: "soon" },
      },
    });
    const result = await answer("/validate/models", body);
    expect(result).toMatchObject({
      uid: "705ab4f5-6393-11e8-b7cc-42010a800002",
      allowed: false,
      status: {
        code: 422,
        reason: "Invalid",
        message: expect.stringContaining('spec.sleepAfter: "soon": expected a duration'),
      },
    });
  });

  test("a pod of a slot member gets a base64 JSONPatch", async () => {
    cluster.slots = [{ metadata: { name: "gpu-0", namespace: "team-a" }, spec: { device: "1" } }];
    const body = review({
      resource: resources.pods,
      object: {
        metadata: { annotations: { "snooze.dev/slot": "gpu-0" } },
        spec: { containers: [{ name: "vllm", image: "vllm/vllm-openai" }] },
      },
    });
    const result = await answer("/mutate/pods", body);
    expect(result.allowed).toBe(true);
    expect(result.patchType).toBe("JSONPatch");
    expect(JSON.parse(Buffer.from(result.patch!, "base64").toString())).toEqual([
      { op: "add", path: "/spec/containers/0/args", value: ["--enable-sleep-mode"] },
      {
        op: "add",
        path: "/spec/containers/0/env",
        value: [
          { name: "VLLM_SERVER_DEV_MODE", value: "1" },
          { name: "NVIDIA_VISIBLE_DEVICES", value: "1" },
        ],
      },
    ]);
  });

  test("a pod with odd containers gets a patch that applies, and a second pass adds nothing", async () => {
    cluster.slots = [{ metadata: { name: "gpu-0", namespace: "team-a" }, spec: { device: "1" } }];
    const pod = {
      metadata: { annotations: { "snooze.dev/slot": "gpu-0" } },
      spec: {
        containers: [
          {
            name: "vllm",
            image: "vllm/vllm-openai",
            args: null,
            env: [
              { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
              { name: "NVIDIA_VISIBLE_DEVICES", value: "all" },
            ],
          },
        ],
      },
    };
    const patchOf = async (object: Record<string, unknown>) => {
      const result = await answer("/mutate/pods", review({ resource: resources.pods, object }));
      return JSON.parse(Buffer.from(result.patch ?? "W10=", "base64").toString()) as JsonPatch;
    };
    const mutated = applyPatch(pod, await patchOf(pod));
    expect(mutated.spec.containers[0]).toMatchObject({
      args: ["--enable-sleep-mode"],
      env: [
        { name: "NVIDIA_VISIBLE_DEVICES", value: "1" },
        { name: "NVIDIA_VISIBLE_DEVICES", value: "1" },
        { name: "VLLM_SERVER_DEV_MODE", value: "1" },
      ],
    });
    expect(await patchOf(mutated)).toEqual([]);
  });

  test("pinning comes back with a warning", async () => {
    const body = review({
      resource: resources.deployments,
      object: {
        metadata: { name: "qwen", annotations: { "snooze.dev/slot": "gpu-0" } },
        spec: { replicas: 2, template: { metadata: { labels: { app: "q" } } } },
      },
    });
    const result = await answer("/mutate/workloads", body);
    expect(result.warnings).toEqual([expect.stringContaining("spec.replicas 2 pinned to 1")]);
  });

  test("a second resident is refused; the read happens only when the slot matters", async () => {
    cluster.states.set("team-a/gpu-0", { residents: [{ kind: "Model", name: "llama", tier: "ready" }] });
    const deployment = (replicas: number) => ({
      metadata: { name: "qwen", annotations: { "snooze.dev/slot": "gpu-0" } },
      spec: { replicas, template: {} },
    });
    const body = review({
      resource: resources.deployments,
      operation: "UPDATE",
      object: deployment(1),
      oldObject: deployment(0),
    });
    const result = await answer("/validate/workloads", body);
    expect(result.status?.message).toMatch(/^slot "gpu-0" already has a resident: Model "llama" \(ready\)/);
    cluster.failReads = new Error("must not be read");
    const unrelated = review({
      resource: resources.deployments,
      operation: "UPDATE",
      object: deployment(1),
      oldObject: deployment(1),
    });
    expect((await answer("/validate/workloads", unrelated)).allowed).toBe(true);
  });

  test("a decision whose reads fail or hang is a denial (fail closed), not a 5xx", async () => {
    const body = scaleFromZero("qwen");
    cluster.failReads = new Error("apiserver unreachable");
    expect((await answer("/validate/scale", body)).status).toMatchObject({
      code: 500,
      message: expect.stringContaining("apiserver unreachable"),
    });
    cluster.failReads = "hang";
    expect((await answer("/validate/scale", body)).status).toMatchObject({
      code: 500,
      // 300 ms from the review's arrival, less what reading it took.
      message: expect.stringMatching(/could not decide within (300|[12]\d\d)ms/),
    });
  });

  test("a decision that outlasts its deadline takes no slot claim after the denial was sent", async () => {
    cluster.workloads.push({
      kind: "Deployment",
      object: {
        metadata: { name: "late", namespace: "team-a", annotations: { "snooze.dev/slot": "gpu-late" } },
      },
    });
    const slotState = cluster.slotState;
    cluster.slotState = async () => {
      await sleep(500);
      return { residents: [] };
    };
    try {
      const body = scaleFromZero("late");
      expect((await answer("/validate/scale", body)).status).toMatchObject({ code: 500, reason: "Timeout" });
      await sleep(400);
      expect(leases.writes).toEqual([]);
      // In time, the same write takes the claim.
      cluster.slotState = async () => ({ residents: [] });
      expect((await answer("/validate/scale", body)).allowed).toBe(true);
      expect(leases.writes.map((w) => w.body.spec?.holderIdentity)).toEqual(["Deployment/late"]);
    } finally {
      cluster.slotState = slotState;
    }
  });

  test("a resource the webhook does not handle is allowed with a warning about the configuration", async () => {
    const result = await answer("/validate/models", review({ resource: resources.pods, object: {} }));
    expect(result).toMatchObject({
      allowed: true,
      warnings: [expect.stringContaining("does not handle pods")],
    });
  });
});

describe("malformed reviews get 400 and no verdict", () => {
  const valid = review({ resource: resources.slots, object: { metadata: { name: "s" } } });
  test.each([
    ["not JSON", "{nope", {}],
    ["JSON but not an object", "[1,2,3]", {}],
    ["wrong apiVersion", { ...valid, apiVersion: "admission.k8s.io/v1beta1" }, {}],
    ["no request", { apiVersion: "admission.k8s.io/v1", kind: "AdmissionReview" }, {}],
    ["empty uid", { ...valid, request: { ...(valid.request as object), uid: "" } }, {}],
    ["unknown operation", { ...valid, request: { ...(valid.request as object), operation: "PATCH" } }, {}],
    [
      "UPDATE without oldObject",
      { ...valid, request: { ...(valid.request as object), operation: "UPDATE" } },
      {},
    ],
    ["object is an array", { ...valid, request: { ...(valid.request as object), object: [] } }, {}],
    ["wrong content type", valid, { "content-type": "text/plain" }],
    // Another type that starts with the same letters (application/json passed as its prefix).
    ["a JSON Patch content type", valid, { "content-type": "application/json-patch+json" }],
    ["JSON text sequences", valid, { "content-type": "application/json-seq" }],
    ["too large", { ...valid, padding: "x".repeat(70_000) }, {}],
    // Parsed, 6 MiB of them took 360 MB (past the pod's 256 MiB) and three at once killed the process.
    ["too many JSON values", { ...valid, padding: Array(6_000).fill({}) }, {}],
  ])("%s", async (_name, body, headers) => {
    const response = await post("/validate/slots", body, headers as Record<string, string>);
    expect(response.status).toBe(400);
    expect(await response.text()).not.toContain('"allowed"');
  });

  test("unknown paths are 404", async () => {
    expect((await post("/validate/pods", valid)).status).toBe(404);
  });

  test("another method than POST on a webhook's path is 405, saying POST", async () => {
    // It was 404 "not found", as if the path were wrong (found by an outside tester).
    for (const method of ["GET", "PUT", "DELETE"]) {
      const response = await fetch(`${server.url}/validate/models`, { method, dispatcher });
      expect(response.status).toBe(405);
      expect(response.headers.get("allow")).toBe("POST");
      expect(await response.text()).toContain("POST");
    }
  });
});

describe("probes, metrics, certificates", () => {
  test("/healthz, /readyz follow readiness, /metrics counts verdicts", async () => {
    const get = (path: string) => fetch(`${server.url}${path}`, { dispatcher });
    expect((await get("/healthz")).status).toBe(200);
    expect((await get("/readyz")).status).toBe(200);
    ready = false;
    expect((await get("/readyz")).status).toBe(503);
    const metrics = await (await get("/metrics")).text();
    expect(metrics).toMatch(
      /snooze_webhook_requests_total\{webhook="validate-models",verdict="denied"\} [1-9]/,
    );
    expect(metrics).toMatch(
      /snooze_webhook_requests_total\{webhook="validate-slots",verdict="malformed"\} [1-9]/,
    );
    expect(metrics).toMatch(/snooze_webhook_requests_total\{webhook="mutate-pods",verdict="patched"\} [1-9]/);
    expect(metrics).toMatch(/snooze_webhook_duration_seconds_bucket\{le="0.005",webhook="validate-models"\}/);
    // As Prometheus reads it (its Go text parser), and as its linter judges names, units and HELP.
    const linted = await lintExposition(metrics);
    expect(linted.problems).toEqual([]);
    expect(Object.keys(linted.families)).toEqual(
      expect.arrayContaining(["snooze_webhook_requests_total", "snooze_webhook_duration_seconds"]),
    );
  });

  test("a new certificate is served to new connections; open ones keep working", async () => {
    const peer = () =>
      new Promise<string>((resolve, reject) => {
        const socket = connect({ host: "127.0.0.1", port: server.port, ca: ca.certPem }, () => {
          resolve(socket.getPeerX509Certificate()!.fingerprint256);
          socket.end();
        });
        socket.on("error", reject);
      });
    const before = await peer();
    // A keep-alive connection opened with the old certificate.
    const keepAlive = new Agent({ connect: { ca: ca.certPem }, keepAliveTimeout: 30_000 });
    expect((await fetch(`${server.url}/healthz`, { dispatcher: keepAlive })).status).toBe(200);
    const next = await issueServingCert(ca, ["127.0.0.1"], validity());
    server.setCertificate(next);
    const after = await peer();
    expect(after).not.toBe(before);
    expect((await fetch(`${server.url}/healthz`, { dispatcher: keepAlive })).status).toBe(200);
    await keepAlive.close();
  });
});
