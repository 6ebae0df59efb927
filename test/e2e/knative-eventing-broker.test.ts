import { randomUUID } from "node:crypto";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { serviceRouterAnnotation } from "../../hack/kubelet/service-router.ts";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import { knativeEventingSuite } from "./components/eventing-suite.ts";
import { tierOf } from "./components/snooze.ts";
import { type Recorder, startRecorder } from "./harness/recording-forwarder.ts";
import { viaProxy } from "./harness/via-proxy.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * config/samples/trigger-prewarm.yaml's path through a real Broker: a Broker's data plane built
 * from the pinned Knative Eventing module (the MT channel-based broker's ingress and filter over
 * the in-memory channel's dispatcher, each a pod under the stand-in kubelet) reaches Services by
 * name through the kubelet's Service router, as through cluster DNS and kube-proxy. An event sent
 * to the Broker's address (as a pod sends: through the router, with a token for the Broker's
 * audience) goes ingress → channel → filter → the sample's Trigger, whose delivery carries the
 * token Eventing mints for the Trigger's own OIDC ServiceAccount; the activator refuses it (403)
 * until the sample's Role and RoleBinding exist, then prewarms the cold model.
 *
 * Between the Trigger and the activator a recorder passes each delivery on and keeps what it was
 * and what it heard, so the test sees the token and every retry.
 */
const broker = "default";
const eventingApi = "/apis/eventing.knative.dev/v1";
const { suite, model, activator, nodeIP, sample, pathOf, pods, logs } = knativeEventingSuite({
  namespace: "snooze-e2e-broker",
  broker: true,
  beforeStop: async () => {
    // Before the namespace goes: their finalizers need Eventing's controllers.
    for (const kind of ["triggers", "brokers"])
      await suite.admin.client.delete(`${eventingApi}/namespaces/${suite.ns.name}/${kind}`).catch(() => {});
  },
});
const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const ready = (pod: Pod) => pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

let router: string;
let recorder: Recorder;
let deadLetters: Recorder;
/** The Broker's address and audience, from its status. */
let address: { url: string; audience: string };

beforeAll(async () => {
  const node = await client().get<{ metadata: { annotations?: Record<string, string> } }>(
    `/api/v1/nodes/${suite.cluster.info.kubelet.nodeName}`,
  );
  router = node.metadata.annotations?.[serviceRouterAnnotation] ?? "";
  if (!router)
    throw new Error("the stand-in kubelet runs no Service router (it needs the netns pod network)");
  recorder = await startRecorder(nodeIP(), activator().url);
  deadLetters = await startRecorder(nodeIP());
}, 30_000);

afterAll(async () => {
  await recorder?.close();
  await deadLetters?.close();
});

/** A token of the namespace's `default` ServiceAccount for `audience`: a sender in the Broker's namespace. */
async function senderToken(audience: string): Promise<string> {
  const answer = await client().create<{ status: { token: string } }>(
    `/api/v1/namespaces/${ns()}/serviceaccounts/default/token`,
    {
      apiVersion: "authentication.k8s.io/v1",
      kind: "TokenRequest",
      spec: { audiences: [audience], expirationSeconds: 600 },
    },
  );
  return answer.status.token;
}

/** Sends a ping event as the sample's PingSource would, to the Broker, as a pod does (through the router). */
async function sendToBroker(
  data: Record<string, string>,
): Promise<{ id: string; status: number; body: string }> {
  const id = randomUUID();
  const answer = await viaProxy(router, address.url, {
    method: "POST",
    headers: {
      authorization: `Bearer ${await senderToken(address.audience)}`,
      "ce-specversion": "1.0",
      "ce-id": id,
      "ce-source": `/apis/v1/namespaces/${ns()}/pingsources/prewarm-qwen`,
      "ce-type": "dev.knative.sources.ping",
      "ce-snoozeaction": "prewarm",
      "content-type": "application/json",
    },
    body: JSON.stringify(data),
  });
  return { id, ...answer };
}

const deliveriesOf = (id: string) =>
  recorder.seen.filter((r) => r.headers["ce-id"] === id && r.path === "/snooze/v1/events");
const claims = (authorization: string | string[] | undefined) =>
  JSON.parse(
    Buffer.from(
      String(authorization)
        .replace(/^Bearer /, "")
        .split(".")[1]!,
      "base64url",
    ).toString(),
  );

describe("a Knative Broker and the sample's Trigger deliver to Snooze with Eventing's sender identity", () => {
  test("an event sent to the Broker reaches the events endpoint with the Trigger's token: 403 until the sample's Role is bound, then the model prewarms", async () => {
    const [, trigger, role, binding] = await sample("trigger-prewarm.yaml");
    expect([trigger.kind, role.kind, binding.kind]).toEqual(["Trigger", "Role", "RoleBinding"]);
    expect(trigger.spec.broker).toBe(broker);

    await client().create(`${eventingApi}/namespaces/${ns()}/brokers`, {
      apiVersion: "eventing.knative.dev/v1",
      kind: "Broker",
      metadata: { name: broker },
    });
    // The sample's Trigger as it is, but for where: this activator (through the recorder).
    trigger.spec.subscriber.uri = `${recorder.url}/snooze/v1/events`;
    await client().create(pathOf(trigger), trigger);

    address = await waitFor(
      async () => {
        const b = await client().get<any>(`${eventingApi}/namespaces/${ns()}/brokers/${broker}`);
        const isReady = b.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
        return isReady && b.status.address?.url ? b.status.address : undefined;
      },
      { what: "the Broker to be Ready with an address", timeoutMs: 90_000, intervalMs: 500, detail: logs },
    );
    expect(address.url).toBe(`http://broker-ingress.knative-eventing.svc.cluster.local/${ns()}/${broker}`);
    const created = await waitFor(
      async () => {
        const t = await client().get<any>(`${pathOf(trigger)}/${trigger.metadata.name}`);
        const isReady = t.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
        return isReady && t.status?.auth?.serviceAccountName ? t : undefined;
      },
      {
        what: "the Trigger to be Ready with its OIDC identity",
        timeoutMs: 60_000,
        intervalMs: 500,
        detail: logs,
      },
    );
    const serviceAccount = created.status.auth.serviceAccountName;
    // The identity Eventing gives the Trigger is the one the sample's RoleBinding names.
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: serviceAccount }]);

    // Refused: the Trigger delivers it with its token, the activator says 403 and why, and
    // Knative does not retry a 403. The in-memory channel hands an event on before it answers, so
    // the Broker's answer to the sender is the delivery's outcome: 500 for a delivery that failed.
    const refused = await sendToBroker({ model, for: "2h" });
    expect(refused.status, refused.body).toBe(500);
    expect(deliveriesOf(refused.id).map((r) => r.status)).toEqual([403]);
    const refusal = `system:serviceaccount:${ns()}:${serviceAccount} may not prewarm models.snooze.dev ${ns()}/${model}`;
    expect(activator().process.tail(200)).toContain(refusal);
    expect(claims(deliveriesOf(refused.id)[0]!.headers.authorization)).toMatchObject({
      aud: ["snooze.dev/events"],
      sub: `system:serviceaccount:${ns()}:${serviceAccount}`,
    });
    expect((await pods()).length).toBe(0);

    await client().create(pathOf(role), role);
    await client().create(pathOf(binding), binding);
    // The activator keeps a refusal for a few seconds: send until one is taken.
    const taken = await waitFor(
      async () => {
        const sent = await sendToBroker({ model, for: "2h" });
        return sent.status === 202 ? sent : undefined;
      },
      {
        what: "a prewarm through the Broker to be taken",
        timeoutMs: 60_000,
        intervalMs: 1_000,
        detail: logs,
      },
    );
    expect(deliveriesOf(taken.id).map((r) => r.status)).toEqual([202]);
    expect(claims(deliveriesOf(taken.id)[0]!.headers.authorization).sub).toBe(
      `system:serviceaccount:${ns()}:${serviceAccount}`,
    );
    await waitFor(
      async () => {
        const p = (await pods()).filter(ready);
        return p.length === 1 && tierOf(p[0]!) === "ready" ? true : undefined;
      },
      { what: "the prewarm to wake the model", timeoutMs: 60_000, intervalMs: 250, detail: logs },
    );
    // The refused one was delivered once: a 403 is not retried.
    expect(deliveriesOf(refused.id).length).toBe(1);
  }, 300_000);

  test("an event naming no model: Snooze's 404 is retried as the Trigger's delivery says, then goes to its dead-letter sink", async () => {
    // The sample's Trigger with a dead-letter sink, made afresh (Ready once its sink is resolved).
    const [, sampleTrigger] = await sample("trigger-prewarm.yaml");
    await client().delete(`${pathOf(sampleTrigger)}/${sampleTrigger.metadata.name}`);
    const trigger = structuredClone(sampleTrigger);
    trigger.metadata.name = "snooze-prewarm-dead-letter";
    trigger.spec.subscriber.uri = `${recorder.url}/snooze/v1/events`;
    trigger.spec.delivery.deadLetterSink = { uri: `${deadLetters.url}/dead-letter` };
    await client().create(pathOf(trigger), trigger);
    const subscriptions = () =>
      client().list<any>(`/apis/messaging.knative.dev/v1/namespaces/${ns()}/subscriptions`);
    let subs: any[] = [];
    await waitFor(
      async () => {
        const t = await client().get<any>(`${pathOf(trigger)}/${trigger.metadata.name}`);
        const isReady = t.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True");
        subs = (await subscriptions()).items;
        const allReady =
          subs.length === 1 &&
          subs.every((x: any) =>
            x.status?.conditions?.some((c: any) => c.type === "Ready" && c.status === "True"),
          );
        return isReady && t.status.deadLetterSinkUri && allReady ? true : undefined;
      },
      {
        what: "the Trigger and its Subscription to be Ready with the dead-letter sink",
        timeoutMs: 60_000,
        intervalMs: 250,
        detail: () => `${JSON.stringify(subs.map((x) => x.status))}\n${logs()}`,
      },
    );
    const sent = await sendToBroker({ model: "nope", for: "1m" });
    const attempts = deliveriesOf(sent.id);
    const dead = deadLetters.seen.filter((r) => r.headers["ce-id"] === sent.id);
    const seen = `${sent.status} ${sent.body}; attempts ${JSON.stringify(attempts.map((r) => [r.status, r.at]))}; dead letters ${dead.length}`;
    // Once and then `retry` (5) more times, each answered 404 (model_not_found); then the dead-letter
    // sink takes it, saying why it died, and the sender hears that it was delivered.
    expect(
      attempts.map((r) => r.status),
      seen,
    ).toEqual([404, 404, 404, 404, 404, 404]);
    expect(dead.length, seen).toBe(1);
    expect(dead[0]!.headers["ce-knativeerrorcode"]).toBe("404");
    expect(dead[0]!.headers["ce-knativeerrordest"]).toBe(`${recorder.url}/snooze/v1/events`);
    expect(sent.status, seen).toBe(202);
  }, 120_000);
});
