import { afterAll, describe, expect, test } from "vitest";
import { autoscalerClass, classAnnotation } from "../../lib/knative/autoscaler-class.ts";
import { snoozeIngressClass } from "../../lib/knative/ingress-class.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { isNotFound, paths } from "../../lib/kube/client.ts";
import {
  autoscalingApi,
  conditionOf,
  deleteKnativeServices,
  findKnative,
  type Knative,
  type KnativeObject,
  knativeMissing,
  knativeService,
  servingApi,
  startKnative,
  waitForKsvcReady,
} from "./components/knative.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { fetchVia } from "./harness/host-fetch.ts";
import { startTcpService, type TcpService } from "./harness/tcp-service.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Snooze-class revisions a platform team gets wrong or deletes, against the real Knative Serving.
 * Invalid `snooze.dev/*` annotations reach the PodAutoscaler when Snooze's webhook does not see
 * them (a namespace without `snooze.dev/webhooks: enabled`, a Configuration applied directly, a
 * webhook installed later), as here, where no Snooze webhook runs. Such a revision gets no Model;
 * it must not be Ready, or Knative's Route moves the Service's traffic to a revision Snooze cannot
 * route. A Service deleted leaves nothing of Snooze's behind.
 */
const folder = findKnative();
let knative: Knative | undefined;
let activatorService: TcpService | undefined;

const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-krevisions",
  async start(s) {
    if (!folder) throw new Error(knativeMissing());
    knative = await startKnative(s.cluster, folder, { ingressClass: snoozeIngressClass });
    activatorService = await startTcpService([]);
    await s.startAutoscaler("autoscaler-a", {
      extra: ["--knative-ingress-probe", `http://${activatorService.address}`],
    });
    s.activator = await s.startActivator("activator-a");
    activatorService.backends = [`127.0.0.1:${s.activator.port}`];
  },
  async teardown() {
    await activatorService?.close();
  },
});

const services = ["typo", "rollout", "refused", "initial", "deleted", "aliased"];
afterAll(async () => {
  await deleteKnativeServices(client(), ns(), services);
  await knative?.stop();
}, 60_000);

const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const logs = () =>
  `${knative?.logs(15)}\nautoscaler:\n${suite.autoscalers.get("autoscaler-a")?.process.tail(40)}\n` +
  `activator:\n${suite.activator.process.tail(20)}`;
const servicePath = (name: string) => `${servingApi}/namespaces/${ns()}/services/${name}`;
const revisionPath = (revision: string) => `${servingApi}/namespaces/${ns()}/revisions/${revision}`;
const paPath = (revision: string) => `${autoscalingApi}/namespaces/${ns()}/podautoscalers/${revision}`;
const deploymentPath = (revision: string) => `${paths.apps("deployments", ns())}/${revision}-deployment`;

const service = (name: string, annotations: Record<string, string>) =>
  knativeService(name, {
    kubelet: suite.cluster.info.kubelet,
    annotations: { [classAnnotation]: autoscalerClass, ...annotations },
  });

/** Waits until the object at `path` passes `check`; the last one read is in the failure. */
const waitObject = (path: string, what: string, check: (o: KnativeObject) => boolean, timeoutMs = 60_000) => {
  let last: KnativeObject | undefined;
  return waitFor(
    async () => {
      last = await client().get<KnativeObject>(path);
      return check(last) ? last : undefined;
    },
    { what, timeoutMs, intervalMs: 250, detail: () => `last: ${JSON.stringify(last?.status)}\n${logs()}` },
  );
};

/** The revision failed, its pods scaled away and none left running. */
async function failedWithNoPods(revision: string, annotation: string) {
  const failed = await waitObject(
    revisionPath(revision),
    `the Revision ${revision} failed`,
    (r) => conditionOf(r, "Ready")?.status === "False",
  );
  // Knative's Active condition carries the PA's reason and Snooze's words: the annotation and why.
  expect(conditionOf(failed, "Active")).toMatchObject({ status: "False", reason: "InvalidSettings" });
  expect(conditionOf(failed, "Active")?.message).toContain(annotation);
  const pa = await client().get<KnativeObject>(paPath(revision));
  expect(conditionOf(pa, "Ready")).toMatchObject({ status: "False", reason: "InvalidSettings" });
  expect(conditionOf(pa, "ScaleTargetInitialized")?.status).toBe("False");
  // No Model runs its pods: Knative's initial one is scaled away, not left awake and unmanaged.
  await waitFor(
    async () => {
      const d = await client().get<{ spec: { replicas: number } }>(deploymentPath(revision));
      const pods = await client().list<{ metadata: { deletionTimestamp?: string } }>(paths.pods(ns()), {
        labelSelector: `serving.knative.dev/revision=${revision}`,
      });
      return d.spec.replicas === 0 && pods.items.length === 0 ? true : undefined;
    },
    { what: `${revision} at 0 pods`, timeoutMs: 60_000, intervalMs: 250, detail: logs },
  );
  // A Warning Event on the Revision says the same (`kubectl describe revision`).
  interface Event {
    regarding: { kind: string; name: string };
    reason: string;
    type: string;
    note: string;
  }
  const event = await waitFor(
    async () =>
      (await client().list<Event>(`/apis/events.k8s.io/v1/namespaces/${ns()}/events`)).items.find(
        (e) =>
          e.regarding.kind === "Revision" && e.regarding.name === revision && e.reason === "InvalidSettings",
      ),
    { what: `an InvalidSettings Event on ${revision}`, timeoutMs: 30_000, intervalMs: 250, detail: logs },
  );
  expect(event.type).toBe("Warning");
  expect(event.note).toContain(annotation);
  // And it stays failed at zero (Knative reads the Deployment complete at 0 on its next reconcile).
  await new Promise((resolve) => setTimeout(resolve, 3_000));
  expect(conditionOf(await client().get<KnativeObject>(revisionPath(revision)), "Ready")?.status).toBe(
    "False",
  );
}

describe("a Snooze-class revision with invalid snooze.dev annotations", () => {
  test("a new Service: the Revision fails with the annotation and why, the Service is not Ready, no pod is left", async () => {
    await client().create(
      `${servingApi}/namespaces/${ns()}/services`,
      service("typo", { "snooze.dev/sleep-level": "3" }),
    );
    await failedWithNoPods("typo-00001", 'snooze.dev/sleep-level="3"');
    const ksvc = await client().get<KnativeObject>(servicePath("typo"));
    expect(conditionOf(ksvc, "Ready")?.status).toBe("False");
  }, 180_000);

  test("a revision whose Model the API server refuses (a served name with a space): the Revision fails with the API server's words, no pod is left", async () => {
    // The annotations are valid; the Model made of the revision is not (its servedModel, read from
    // the container's --served-model-name, may hold no whitespace).
    const s = service("refused", {});
    const container = s.spec.template.spec.containers[0]!;
    container.args = container.args.map((a, i, all) => (all[i - 1] === "--served-model-name" ? "qwen 3" : a));
    await client().create(`${servingApi}/namespaces/${ns()}/services`, s);
    await failedWithNoPods("refused-00001", "spec.servedModel");
  }, 180_000);

  test("a rollout to such a revision: the old revision keeps the Service's traffic and answers", async () => {
    await client().create(`${servingApi}/namespaces/${ns()}/services`, service("rollout", {}));
    const ksvc = await waitForKsvcReady(client(), ns(), "rollout", { timeoutMs: 120_000, detail: logs });
    const url = String((ksvc.status as { url?: string }).url);
    const ask = async () => {
      const response = await fetchVia(suite.activator.url)(`${url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "rollout",
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 2,
        }),
        signal: AbortSignal.timeout(60_000),
      });
      return { status: response.status, text: await response.text() };
    };
    expect((await ask()).status).toBe(200);

    // A typo in a key: an unknown snooze.dev setting.
    await client().patch(servicePath("rollout"), {
      spec: { template: { metadata: { annotations: { "snooze.dev/sleep-afer": "5m" } } } },
    });
    await failedWithNoPods("rollout-00002", "snooze.dev/sleep-afer");
    const after = await client().get<KnativeObject>(servicePath("rollout"));
    const status = after.status as {
      latestReadyRevisionName?: string;
      traffic?: { revisionName?: string }[];
    };
    expect(status.latestReadyRevisionName).toBe("rollout-00001");
    expect(status.traffic?.map((t) => t.revisionName)).toEqual(["rollout-00001"]);
    for (let i = 0; i < 5; i++) {
      const answer = await ask();
      expect(answer.status, answer.text).toBe(200);
    }
  }, 240_000);
});

describe("initial-scale above max-scale", () => {
  test("Knative starts initial-scale pods and the Revision gets Ready; then the pods above max-scale go, as the KPA scales to max-scale", async () => {
    const revision = "initial-00001";
    await client().create(
      `${servingApi}/namespaces/${ns()}/services`,
      service("initial", {
        "autoscaling.knative.dev/initial-scale": "3",
        "autoscaling.knative.dev/max-scale": "1",
      }),
    );
    await waitForKsvcReady(client(), ns(), "initial", { timeoutMs: 120_000, detail: logs });
    // The scale target was initialized at 3 pods up.
    const pa = await client().get<KnativeObject>(paPath(revision));
    expect(conditionOf(pa, "ScaleTargetInitialized")?.status).toBe("True");
    // Then the two above max-scale sleep and go at once, not after zeroAfter (2 h by default).
    let last = "";
    await waitFor(
      async () => {
        const d = await client().get<{ spec: { replicas: number } }>(deploymentPath(revision));
        const pods = await client().list<{ metadata: { deletionTimestamp?: string } }>(paths.pods(ns()), {
          labelSelector: `serving.knative.dev/revision=${revision}`,
        });
        const live = pods.items.filter((p) => !p.metadata.deletionTimestamp).length;
        last = `Deployment ${d.spec.replicas}, ${live} pods`;
        return d.spec.replicas === 1 && live === 1 ? true : undefined;
      },
      {
        what: `${revision} at max-scale 1`,
        timeoutMs: 60_000,
        intervalMs: 250,
        detail: () => `${last}\n${logs()}`,
      },
    );
    const revisionNow = await client().get<KnativeObject>(revisionPath(revision));
    expect(conditionOf(revisionNow, "Ready")?.status).toBe("True");
  }, 180_000);
});

describe("a Snooze-class Service deleted", () => {
  test("its Model goes, and so does the Model's Lease in the autoscaler's namespace", async () => {
    await client().create(`${servingApi}/namespaces/${ns()}/services`, service("deleted", {}));
    await waitForKsvcReady(client(), ns(), "deleted", { timeoutMs: 120_000, detail: logs });
    const leases = async () =>
      (
        await client().list<{ metadata: { name: string } }>(
          `/apis/coordination.k8s.io/v1/namespaces/snooze-system/leases`,
        )
      ).items.map((l) => l.metadata.name);
    const lease = `snooze-model-${ns()}.deleted-00001`;
    await waitFor(async () => ((await leases()).includes(lease) ? true : undefined), {
      what: `the Lease ${lease}`,
      timeoutMs: 30_000,
      detail: logs,
    });
    await client().delete(servicePath("deleted"));
    const model = `${paths.custom(group, version, "models", ns())}/deleted-00001`;
    let last: string[] = [];
    await waitFor(
      async () => {
        const gone = await client()
          .get(model)
          .then(
            () => false,
            (error: unknown) => isNotFound(error),
          );
        last = await leases();
        return gone && !last.includes(lease) ? true : undefined;
      },
      {
        what: "the Model and its Lease gone",
        timeoutMs: 60_000,
        intervalMs: 250,
        detail: () => `leases: ${last.join(", ")}\n${logs()}`,
      },
    );
  }, 180_000);
});

describe("snooze.dev/aliases on a Knative Service", () => {
  test("a rollout: the alias follows the new revision once it is ready, as the Route's latest traffic", async () => {
    interface AdminModel {
      id: string;
      aliases: string[];
    }
    const aliasHolders = async () =>
      (
        (await (await fetch(`${suite.activator.url}/snooze/v1/models`)).json()) as { models: AdminModel[] }
      ).models
        .filter((m) => m.aliases.includes("aliased-chat"))
        .map((m) => m.id);
    const askByAlias = async () => {
      const response = await fetch(`${suite.activator.url}/v1/chat/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({
          model: "aliased-chat",
          messages: [{ role: "user", content: "hi" }],
          max_tokens: 2,
        }),
        signal: AbortSignal.timeout(60_000),
      });
      return { status: response.status, text: await response.text() };
    };
    const holdersAre = (expected: string[], what: string) => {
      let last: string[] = [];
      return waitFor(
        async () => {
          last = await aliasHolders();
          return JSON.stringify(last) === JSON.stringify(expected) ? true : undefined;
        },
        { what, timeoutMs: 60_000, intervalMs: 250, detail: () => `holders: ${last.join(", ")}\n${logs()}` },
      );
    };
    await client().create(
      `${servingApi}/namespaces/${ns()}/services`,
      service("aliased", { "snooze.dev/aliases": "aliased-chat" }),
    );
    await waitForKsvcReady(client(), ns(), "aliased", { timeoutMs: 120_000, detail: logs });
    await holdersAre(["aliased-00001"], "the alias on the first revision");
    const first = await askByAlias();
    expect(first.status, first.text).toBe(200);

    // A rollout: a new template makes aliased-00002, which lists the same alias.
    await client().patch(servicePath("aliased"), {
      spec: { template: { metadata: { annotations: { "snooze.dev/sleep-after": "5m" } } } },
    });
    await waitObject(
      servicePath("aliased"),
      "the Service's latest ready revision aliased-00002",
      (s) => (s.status as { latestReadyRevisionName?: string }).latestReadyRevisionName === "aliased-00002",
      120_000,
    );
    await holdersAre(["aliased-00002"], "the alias on the new revision");
    const modelPath = (name: string) => `${paths.custom(group, version, "models", ns())}/${name}`;
    const newer = await client().get<KnativeObject>(modelPath("aliased-00002"));
    expect(conditionOf(newer, "RevisionReady")?.status).toBe("True");
    const answer = await askByAlias();
    expect(answer.status, answer.text).toBe(200);
    // The old revision's Model says where its alias went.
    const older = await waitObject(
      modelPath("aliased-00001"),
      "the old revision's AliasesTaken",
      (m) => conditionOf(m, "AliasesTaken")?.status === "True",
      30_000,
    );
    expect(conditionOf(older, "AliasesTaken")?.message).toContain(
      `alias "aliased-chat" goes to revision ${ns()}/aliased-00002`,
    );
  }, 300_000);
});
