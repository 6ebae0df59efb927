import { describe, expect, test } from "vitest";
import type { Pod } from "../../lib/kube/pod-replica.ts";
import { knativeEventingSuite } from "./components/eventing-suite.ts";
import { tierOf } from "./components/snooze.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * A real Knative Eventing (controller, webhook and the PingSource adapter, built from the pinned
 * module) delivers a scheduled prewarm to Snooze's events endpoint with its own sender identity
 * (`authentication-oidc: enabled`): Eventing makes the PingSource's OIDC ServiceAccount, scales its
 * adapter Deployment up, the adapter's pod (the real `mtping` under the stand-in kubelet, in a
 * network namespace of its own) mints a token of that ServiceAccount for the sink's audience and
 * sends the CloudEvent; `snooze activator` checks the token (TokenReview) and the RBAC verb on the
 * Model (SubjectAccessReview) against the real kube-apiserver, then prewarms the model.
 * knative-eventing-broker.test.ts does the same through a Broker and a Trigger.
 */
const source = "prewarm-qwen";
const sourcesApi = "/apis/sources.knative.dev/v1";
const { suite, model, activator, sample, pathOf, pods, logs } = knativeEventingSuite({
  namespace: "snooze-e2e-eventing",
  beforeStop: async () => {
    // Before the namespace goes: the PingSource's finalizer needs Eventing's controller.
    await suite.admin.client
      .delete(`${sourcesApi}/namespaces/${suite.ns.name}/pingsources/${source}`)
      .catch(() => {});
    await waitFor(
      async () =>
        (await suite.admin.client.list(`${sourcesApi}/namespaces/${suite.ns.name}/pingsources`)).items
          .length === 0
          ? true
          : undefined,
      { what: "Eventing to let the PingSource go", timeoutMs: 30_000 },
    ).catch((error: unknown) => console.warn(String(error)));
  },
});

const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const ready = (pod: Pod) => pod.status?.conditions?.some((c) => c.type === "Ready" && c.status === "True");

describe("Knative Eventing delivers to Snooze with its own sender identity", () => {
  test("the samples' PingSources, Trigger and RBAC pass Eventing's own validation", async () => {
    for (const file of ["scheduled-prewarm.yaml", "trigger-prewarm.yaml"])
      for (const object of await sample(file)) await client().create(`${pathOf(object)}?dryRun=All`, object);
  });

  test("the scheduled-prewarm sample: 403 naming the rule until its Role is bound, then the model wakes and stays awake for its `for`", async () => {
    // The sample's objects as they are, but for when and where: every 2 s (Eventing's cron takes
    // an optional seconds field), to this activator (no cluster DNS here).
    const [ping, role, binding] = await sample("scheduled-prewarm.yaml");
    expect([ping.kind, role.kind, binding.kind]).toEqual(["PingSource", "Role", "RoleBinding"]);
    ping.spec.schedule = "*/2 * * * * *";
    delete ping.spec.timezone;
    ping.spec.sink.uri = `${activator().url}/snooze/v1/events`;
    await client().create(pathOf(ping), ping);
    // The identity Eventing gives the source is the one the sample's RoleBinding names.
    const created = await waitFor(
      async () => {
        const s = await client().get<any>(`${pathOf(ping)}/${ping.metadata.name}`);
        return s.status?.auth?.serviceAccountName ? s : undefined;
      },
      { what: "Eventing to give the PingSource its OIDC identity", timeoutMs: 30_000, detail: logs },
    );
    const serviceAccount = created.status.auth.serviceAccountName;
    expect(binding.subjects).toEqual([{ kind: "ServiceAccount", name: serviceAccount }]);

    // Its adapter's pod runs, becomes Ready (its readiness probe waits 20 s) and sends: refused,
    // and the activator's log says why and to whom.
    const refusal = `system:serviceaccount:${ns()}:${serviceAccount} may not prewarm models.snooze.dev ${ns()}/${model}`;
    await waitFor(async () => (activator().process.tail(200).includes(refusal) ? true : undefined), {
      what: "the adapter's first delivery, refused for want of the Role",
      timeoutMs: 90_000,
      intervalMs: 500,
      detail: logs,
    });
    expect((await pods()).length).toBe(0);

    await client().create(pathOf(role), role);
    await client().create(pathOf(binding), binding);
    // A tick after the binding is seen (the activator keeps a refusal for a few seconds): the prewarm.
    await waitFor(
      async () => {
        const p = (await pods()).filter(ready);
        return p.length === 1 && tierOf(p[0]!) === "ready" ? true : undefined;
      },
      { what: "the prewarm to wake the model", timeoutMs: 60_000, intervalMs: 250, detail: logs },
    );
    // No more ticks: what keeps it awake now is the prewarm's `for`, not new events.
    await client().patch(`${pathOf(ping)}/${ping.metadata.name}`, { spec: { schedule: "0 0 1 1 *" } });
    await new Promise((resolve) => setTimeout(resolve, 6_000)); // 3× sleepAfter
    expect((await pods()).filter(ready).map(tierOf)).toEqual(["ready"]);
  }, 240_000);
});
