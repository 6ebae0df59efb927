import { execFile } from "node:child_process";
import { promisify } from "node:util";
import OpenAI from "openai";
import { afterAll, describe, expect, test } from "vitest";
import { serviceActivators } from "../../autoscaler/kube/knative-ingress/activator-prober.ts";
import { autoscalerClass, classAnnotation } from "../../lib/knative/autoscaler-class.ts";
import { ingressClassAnnotation, snoozeIngressClass } from "../../lib/knative/ingress-class.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import {
  conditionOf,
  deleteKnativeServices,
  findKnative,
  type Knative,
  type KnativeObject,
  knativeMissing,
  knativeService,
  networkingApi,
  servingApi,
  startKnative,
} from "./components/knative.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { system } from "./components/snooze.ts";
import { fetchVia } from "./harness/host-fetch.ts";
import { startTcpService, type TcpService } from "./harness/tcp-service.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Snooze's Knative networking layer against a real Knative Serving (controller, webhook, built from
 * the pinned module): a Snooze-class Service's Route gets a KIngress of Snooze's ingress class,
 * which Snooze's autoscaler makes Ready once the activator routes it, and requests with the
 * Service's Host reach the revision through the activator: held while it is cold, split between
 * revisions by weight, moved to a new revision only when Knative moves the Route. The activator is
 * probed through a TCP forwarder that stands for its Service (no kube-proxy here).
 */
const folder = findKnative();
const name = "chat";
const rev = (n: number) => `${name}-0000${n}`;
/** A Service on Snooze's ingress class whose revisions Knative's KPA scales (no Snooze Model). */
const kpaName = "plain";
let knative: Knative | undefined;
let activatorService: TcpService | undefined;

const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-kingress",
  async start(s) {
    if (!folder) throw new Error(knativeMissing());
    knative = await startKnative(s.cluster, folder, {
      ingressClass: snoozeIngressClass,
      // The first revision starts with no pod, so its first request is held through a cold start.
      config: { "config-autoscaler": { "allow-zero-initial-scale": "true" } },
    });
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

afterAll(async () => {
  await deleteKnativeServices(client(), ns(), [name, kpaName]);
  await knative?.stop();
}, 60_000);

const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const logs = () => `${knative?.logs(15)}\n${suite.logs(30, 30)}`;
const ksvcPath = () => `${servingApi}/namespaces/${ns()}/services/${name}`;
const ingressPath = () => `${networkingApi}/namespaces/${ns()}/ingresses/${name}`;

/**
 * The user container's args: served names `chat-v<n>` (answers carry the first; the revision's
 * Model's servedModel, which the warm-up asks for) and `chat` (what clients of the URL ask for).
 * Not the revision's name: Snooze addresses the revision by its Model, not by what the engine serves.
 */
const args = (n: number, loadTime: string) => [
  "Qwen/Qwen3-0.6B",
  "--served-model-name",
  `${name}-v${n}`,
  name,
  "--enable-sleep-mode",
  "--load-time",
  loadTime,
  "--ttft",
  "5ms",
  "--itl",
  "1ms",
];

let url = "";
/** The OpenAI client as a user has it: the Service's URL, through the activator (what its DNS name would reach). */
const openai = () =>
  new OpenAI({
    baseURL: `${url}/v1`,
    apiKey: "unused",
    fetch: fetchVia(suite.activator.url),
    maxRetries: 0,
    timeout: 120_000,
  });
const ask = async (o = openai()) => {
  const answer = await o.chat.completions.create({
    model: name,
    messages: [{ role: "user", content: "hi" }],
    max_tokens: 2,
  });
  return answer.model;
};

/** Waits until the ksvc is Ready for its latest generation (the Route moved, its KIngress Ready). */
async function ksvcSettled(what: string): Promise<KnativeObject> {
  return waitFor(
    async () => {
      const ksvc = await client().get<KnativeObject & { metadata: { generation?: number } }>(ksvcPath());
      const observed = (ksvc.status as { observedGeneration?: number } | undefined)?.observedGeneration;
      return conditionOf(ksvc, "Ready")?.status === "True" && observed === ksvc.metadata.generation
        ? ksvc
        : undefined;
    },
    { what, timeoutMs: 120_000, intervalMs: 200, detail: logs },
  );
}

async function activatorModel(id: string) {
  const answer = (await (await fetch(`${suite.activator.url}/snooze/v1/models`)).json()) as {
    models: { id: string; tier: string; held: number }[];
  };
  return answer.models.find((m) => m.id === id);
}

describe("Snooze's Knative ingress class", () => {
  test("a Snooze-class Service is Ready with its URL; the first request, by its Host, is held during the cold start and answered", async () => {
    await client().create(
      `${servingApi}/namespaces/${ns()}/services`,
      knativeService(name, {
        kubelet: suite.cluster.info.kubelet,
        args: args(1, "2s"),
        annotations: { [classAnnotation]: autoscalerClass, "autoscaling.knative.dev/initial-scale": "0" },
      }),
    );
    const ksvc = await ksvcSettled("the Service Ready");
    url = String((ksvc.status as { url?: string }).url);
    expect(url).toMatch(new RegExp(`^http://${name}\\.${ns()}\\.`));

    // The KIngress Knative made carries Snooze's class; its status is what made the Route Ready.
    const ingress = await client().get<KnativeObject & { metadata: { generation: number } }>(ingressPath());
    expect(ingress.metadata.annotations?.[ingressClassAnnotation]).toBe(snoozeIngressClass);
    const status = ingress.status as {
      observedGeneration: number;
      publicLoadBalancer: { ingress: { domainInternal: string }[] };
      privateLoadBalancer: { ingress: { domainInternal: string }[] };
    };
    expect(status.observedGeneration).toBe(ingress.metadata.generation);
    for (const type of ["NetworkConfigured", "LoadBalancerReady", "Ready"])
      expect(conditionOf(ingress, type)?.status, type).toBe("True");
    const activatorDomain = "snooze-activator.snooze-system.svc.cluster.local";
    expect(status.publicLoadBalancer.ingress).toEqual([{ domainInternal: activatorDomain }]);
    expect(status.privateLoadBalancer.ingress).toEqual([{ domainInternal: activatorDomain }]);
    // Knative's placeholder Service for the Route points at the activator.
    const placeholder = await client().get<{ spec: { type: string; externalName?: string } }>(
      `/api/v1/namespaces/${ns()}/services/${name}`,
    );
    expect(placeholder.spec).toMatchObject({ type: "ExternalName", externalName: activatorDomain });

    const env = { ...process.env, KUBECONFIG: suite.cluster.info.kubeconfigPath };
    const { stdout } = await promisify(execFile)(suite.cluster.info.kubectl, ["get", "ksvc", "-n", ns()], {
      env,
    });
    expect(stdout).toMatch(
      new RegExp(`^${name}\\s+${url.replace(/\./g, "\\.")}\\s+${rev(1)}\\s+${rev(1)}\\s+True`, "m"),
    );

    // No pod yet: the request waits in the activator while the revision starts (2 s of loading).
    const answered = ask();
    const held = await waitFor(
      async () => ((m) => (m && m.held >= 1 ? m : undefined))(await activatorModel(rev(1))),
      { what: "the request held in the activator", timeoutMs: 10_000, intervalMs: 20, detail: logs },
    );
    expect(held.tier).not.toBe("ready");
    expect(await answered).toBe(`${name}-v1`);
  }, 200_000);

  test("an unknown host that names no model is a 404 in OpenAI's shape; another host keeps routing by model", async () => {
    const other = new OpenAI({
      baseURL: `http://nope.${ns()}.example.com/v1`,
      apiKey: "unused",
      fetch: fetchVia(suite.activator.url),
      maxRetries: 0,
    });
    const error = await other.completions.create({ prompt: "hi" } as never).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.NotFoundError);
    expect((error as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("host_not_found");
    // The same activator, by the body's model (the revision's Model id): today's path. The engine
    // gets the name it serves (the Model's servedModel), not the revision's.
    const byModel = new OpenAI({ baseURL: `${suite.activator.url}/v1`, apiKey: "unused", maxRetries: 0 });
    const answer = await byModel.chat.completions.create({
      model: rev(1),
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 2,
    });
    expect(answer.model).toBe(`${name}-v1`);
    // What every revision serves names no one revision: by body, outside the Service's hosts, refused.
    const shared = await byModel.chat.completions
      .create({ model: name, messages: [{ role: "user", content: "hi" }], max_tokens: 2 })
      .catch((e: unknown) => e);
    expect(shared).toBeInstanceOf(OpenAI.NotFoundError);
    expect((shared as InstanceType<typeof OpenAI.NotFoundError>).code).toBe("model_not_found");
  });

  test("a new revision (changed args) gets traffic only once it is ready, and then all of it", async () => {
    const seen: { at: number; model?: string; error?: string }[] = [];
    let stop = false;
    const o = openai();
    // One client asking all along, bounded in count and time.
    const loop = (async () => {
      const until = Date.now() + 150_000;
      for (let i = 0; i < 3_000 && !stop && Date.now() < until; i++) {
        const model = await ask(o).catch((error: unknown) => {
          seen.push({ at: Date.now(), error: String(error) });
          return undefined;
        });
        if (model) seen.push({ at: Date.now(), model });
        if (model === `${name}-v2`) {
          // A few more: nothing goes back to the old revision.
          if (seen.filter((s) => s.model === `${name}-v2`).length >= 20) break;
        }
      }
    })();
    await waitFor(async () => (seen.length >= 5 ? true : undefined), {
      what: "the first answers",
      timeoutMs: 30_000,
      detail: logs,
    });
    // The new revision loads for 3 s: Knative keeps the Route on the old one meanwhile.
    // initial-scale 1: the revision is Ready only once its pod is up (a merge patch replaces the
    // containers list whole, so the container goes whole).
    const template = knativeService(name, { kubelet: suite.cluster.info.kubelet, args: args(2, "3s") }).spec
      .template;
    await client().patch(ksvcPath(), {
      spec: {
        template: {
          metadata: { annotations: { "autoscaling.knative.dev/initial-scale": "1" } },
          spec: { containers: template.spec.containers },
        },
      },
    });
    const ksvc = await ksvcSettled("the Service Ready on the new revision");
    expect((ksvc.status as { latestReadyRevisionName?: string }).latestReadyRevisionName).toBe(rev(2));
    await loop.finally(() => {
      stop = true;
    });
    const revision = await client().get<KnativeObject>(
      `${servingApi}/namespaces/${ns()}/revisions/${rev(2)}`,
    );
    const readyAt = Date.parse(
      String(
        (conditionOf(revision, "Ready") as { lastTransitionTime?: string } | undefined)?.lastTransitionTime,
      ),
    );

    expect(seen.filter((s) => s.error)).toEqual([]);
    const first = seen.findIndex((s) => s.model === `${name}-v2`);
    expect(first, "the new revision answered").toBeGreaterThan(0);
    // Make before break: the new revision answered only after Knative saw it Ready (the condition's
    // time is in whole seconds, rounded down), and from then on only it did (the splits swapped at once).
    expect(seen[first]!.at).toBeGreaterThanOrEqual(readyAt);
    expect(seen.slice(0, first).every((s) => s.model === `${name}-v1`)).toBe(true);
    expect(seen.slice(first).every((s) => s.model === `${name}-v2`)).toBe(true);
  }, 200_000);

  test("a 50/50 split between two revisions is honoured within ±10% over 200 requests", async () => {
    await client().patch(ksvcPath(), {
      spec: {
        traffic: [
          { revisionName: rev(1), percent: 50 },
          { revisionName: rev(2), percent: 50 },
        ],
      },
    });
    await ksvcSettled("the Service Ready with the split");
    const ingress = await client().get<{
      spec: { rules: { http: { paths: { splits: { percent: number }[] }[] } }[] };
    }>(ingressPath());
    expect(ingress.spec.rules[0]?.http.paths.at(-1)?.splits.map((s) => s.percent)).toEqual([50, 50]);
    const o = openai();
    const counts: Record<string, number> = {};
    for (let i = 0; i < 200; i++) {
      const model = await ask(o);
      counts[model] = (counts[model] ?? 0) + 1;
    }
    expect(Object.keys(counts).sort()).toEqual([`${name}-v1`, `${name}-v2`]);
    for (const count of Object.values(counts)) {
      expect(count).toBeGreaterThanOrEqual(90);
      expect(count).toBeLessThanOrEqual(110);
    }
  }, 200_000);

  test("a burst of 300 concurrent requests through the split loses none", async () => {
    const o = openai();
    const outcomes = await Promise.allSettled(Array.from({ length: 300 }, () => ask(o)));
    const failed = outcomes.flatMap((r) => (r.status === "rejected" ? [String(r.reason)] : []));
    expect(failed.slice(0, 5)).toEqual([]);
    const models = outcomes.map((r) => (r.status === "fulfilled" ? r.value : ""));
    for (const n of [1, 2]) {
      const count = models.filter((m) => m === `${name}-v${n}`).length;
      expect(count).toBeGreaterThanOrEqual(135);
      expect(count).toBeLessThanOrEqual(165);
    }
  }, 200_000);

  test("a Service of another autoscaler class on this ingress class is not Ready, and says why; its requests are refused", async () => {
    await client().create(
      `${servingApi}/namespaces/${ns()}/services`,
      knativeService(kpaName, {
        kubelet: suite.cluster.info.kubelet,
        serviceAnnotations: { [ingressClassAnnotation]: snoozeIngressClass },
      }),
    );
    const ingress = await waitFor(
      async () => {
        const i = await client().get<KnativeObject>(
          `${networkingApi}/namespaces/${ns()}/ingresses/${kpaName}`,
        );
        return conditionOf(i, "Ready")?.status === "False" ? i : undefined;
      },
      { what: "the KPA Service's KIngress refused", timeoutMs: 120_000, intervalMs: 250, detail: logs },
    );
    expect(conditionOf(ingress, "NetworkConfigured")).toMatchObject({
      status: "False",
      reason: "RevisionWithoutModel",
    });
    const ksvc = await waitFor(
      async () => {
        const k = await client().get<KnativeObject>(`${servingApi}/namespaces/${ns()}/services/${kpaName}`);
        return conditionOf(k, "Ready")?.status === "False" ? k : undefined;
      },
      { what: "the KPA Service not Ready", timeoutMs: 60_000, intervalMs: 250, detail: logs },
    );
    expect(conditionOf(ksvc, "Ready")?.message).toContain(`${ns()}/${kpaName}-00001`);
    const host = `${kpaName}.${ns()}.svc.cluster.local`;
    const error = await new OpenAI({
      baseURL: `http://${host}/v1`,
      apiKey: "unused",
      fetch: fetchVia(suite.activator.url),
      maxRetries: 0,
    }).completions
      .create({ model: kpaName, prompt: "hi" })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(OpenAI.APIError);
    expect((error as InstanceType<typeof OpenAI.APIError>).status).toBe(503);
    expect((error as InstanceType<typeof OpenAI.APIError>).code).toBe("revision_not_served");
  }, 200_000);

  test("the activators probed are the ready endpoints of their Service, as the autoscaler may list them", async () => {
    const slices = `/apis/discovery.k8s.io/v1/namespaces/${system}/endpointslices`;
    const service = `activators-${ns()}`.slice(0, 63);
    const slice = (n: number, endpoints: { addresses: string[]; conditions: { ready: boolean } }[]) => ({
      apiVersion: "discovery.k8s.io/v1",
      kind: "EndpointSlice",
      metadata: {
        name: `${service}-${n}`.slice(0, 63),
        namespace: system,
        labels: { "kubernetes.io/service-name": service },
      },
      addressType: "IPv4",
      endpoints,
      ports: [{ name: "http", port: 8080, protocol: "TCP" }],
    });
    await client().create(
      slices,
      slice(1, [
        { addresses: ["10.99.0.5"], conditions: { ready: true } },
        { addresses: ["10.99.0.6"], conditions: { ready: false } },
      ]),
    );
    await client().create(slices, slice(2, [{ addresses: ["10.99.0.7"], conditions: { ready: true } }]));
    try {
      // As the autoscaler's ServiceAccount: its Role lets it list the endpoints of snooze-system.
      const asAutoscaler = await KubeClient.fromKubeConfig(
        await suite.cluster.asServiceAccount(system, "snooze-autoscaler"),
      );
      try {
        expect(await serviceActivators(asAutoscaler, system, service)).toEqual([
          "http://10.99.0.5:8080",
          "http://10.99.0.7:8080",
        ]);
      } finally {
        await asAutoscaler.close();
      }
    } finally {
      for (const n of [1, 2])
        await client()
          .delete(`${slices}/${`${service}-${n}`.slice(0, 63)}`)
          .catch(() => {});
    }
  });
});
