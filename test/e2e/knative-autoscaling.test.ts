import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, describe, expect, test } from "vitest";
import { autoscalerClass, classAnnotation } from "../../lib/knative/autoscaler-class.ts";
import { snoozeIngressClass } from "../../lib/knative/ingress-class.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { isNotFound, paths } from "../../lib/kube/client.ts";
import type { ModelResource } from "../../lib/kube/model-resource.ts";
import type { Pod as KubePod } from "../../lib/kube/pod-replica.ts";
import { isResident, type Tier } from "../../lib/replica-event.ts";
import {
  autoscalingApi,
  conditionOf,
  deleteKnativeServices,
  findKnative,
  type Knative,
  type KnativeObject,
  knativeMissing,
  knativeNamespace,
  knativeService,
  kpaClass,
  networkingApi,
  servingApi,
  startKnative,
  waitForCondition,
  waitForKsvcReady,
} from "./components/knative.ts";
import { kubeSnoozeSuite } from "./components/kube-suite.ts";
import { tierOf } from "./components/snooze.ts";
import { fetchVia } from "./harness/host-fetch.ts";
import { startTcpService, type TcpService } from "./harness/tcp-service.ts";
import { waitFor } from "./harness/wait.ts";

/**
 * Snooze as a Knative autoscaler class against a real Knative Serving (controller, webhook and the
 * KPA, built from the pinned module): a Snooze-class Service's revision gets a PodAutoscaler that
 * Snooze reconciles (a Model named as the revision scaling its Deployment, the SKS, the PA's
 * status), so the Revision and the Service are Ready; its pod sleeps when idle (never deleted),
 * a request by the Service's Host (Snooze's ingress class, through the activator) wakes the same
 * pod, and a longer idle scales the Deployment to zero; `min-scale: 1` keeps one pod, asleep; a
 * Service without the class, or with a class Snooze does not serve, is left to others. A revision
 * whose pod cannot pull its image: held requests told at once, and a new revision's first pod left
 * for Knative to judge. Scale bounds as the KPA has them: no min-scale while a revision is
 * unreachable, config-autoscaler's defaults (and not a value Knative would refuse).
 */
const folder = findKnative();
let knative: Knative | undefined;
let activatorService: TcpService | undefined;

const suite = kubeSnoozeSuite({
  namespace: "snooze-e2e-kpa",
  async start(s) {
    if (!folder) throw new Error(knativeMissing());
    knative = await startKnative(s.cluster, folder, {
      ingressClass: snoozeIngressClass,
      // A slot member's revision starts with no pod (the webhook pins initial-scale to 0).
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

const services = [
  "unpulled",
  "unpullable",
  "unconfigured",
  "sleepy",
  "kept",
  "burst",
  "slot-a",
  "slot-b",
  "plain",
  "other",
  "rolled",
  "defaulted",
];
afterAll(async () => {
  await deleteKnativeServices(client(), ns(), services);
  await knative?.stop();
}, 60_000);

const client = () => suite.admin.client;
const ns = () => suite.ns.name;
const logs = () =>
  `${knative?.logs(15)}\nautoscaler:\n${suite.autoscalers.get("autoscaler-a")?.process.tail(60)}\n` +
  `activator:\n${suite.activator.process.tail(20)}`;
const revisionOf = (name: string) => `${name}-00001`;
const paPath = (revision: string) => `${autoscalingApi}/namespaces/${ns()}/podautoscalers/${revision}`;
const modelPath = (revision: string) => `${paths.custom(group, version, "models", ns())}/${revision}`;
const deploymentPath = (revision: string) => `${paths.apps("deployments", ns())}/${revision}-deployment`;

/**
 * The user container: a sim serving the Service's name only (what clients of its URL ask for; the
 * revision's Model takes it as servedModel, which Snooze's warm-up asks for; docs/knative.md).
 */
const args = (name: string) => [
  "Qwen/Qwen3-0.6B",
  "--served-model-name",
  name,
  "--enable-sleep-mode",
  "--load-time",
  "500ms",
  "--ttft",
  "5ms",
  "--itl",
  "1ms",
];

interface Pod {
  metadata: {
    name: string;
    uid: string;
    annotations?: Record<string, string>;
    deletionTimestamp?: string;
  };
  status?: { podIP?: string; conditions?: { type: string; status: string }[] };
}
/** The pods of one revision, or of several in one list: one snapshot, read at one moment. */
const revisionPods = async (revision: string | readonly string[]) =>
  (
    await client().list<Pod>(paths.pods(ns()), {
      labelSelector:
        typeof revision === "string"
          ? `serving.knative.dev/revision=${revision}`
          : `serving.knative.dev/revision in (${revision.join(",")})`,
    })
  ).items.filter((p) => !p.metadata.deletionTimestamp);
const deployment = (revision: string) =>
  client().get<{
    spec: { replicas: number };
    metadata: { managedFields?: { manager: string }[] };
  }>(deploymentPath(revision));
type Model = ModelResource & {
  metadata: { ownerReferences?: { kind: string; name: string; uid: string }[] };
};
const model = (revision: string) => client().get<Model>(modelPath(revision));
const createService = (service: ReturnType<typeof knativeService>) =>
  client().create(`${servingApi}/namespaces/${ns()}/services`, service);
/** Waits until the Knative Service `name` is Ready; resolves to its URL. */
const readyUrl = async (name: string) => {
  const ksvc = await waitForKsvcReady(client(), ns(), name, { timeoutMs: 120_000, detail: logs });
  return String((ksvc.status as { url?: string }).url);
};

/** The engine's own view, on the user container's port (Knative's 8080) at the pod's IP. */
async function engineAsleep(pod: Pod): Promise<boolean> {
  const response = await fetch(`http://${pod.status?.podIP}:8080/sim/state`, {
    signal: AbortSignal.timeout(2_000),
  });
  return ((await response.json()) as { isSleeping: boolean }).isSleeping;
}

/**
 * A chat completion through the activator: by the Service's URL (its Host), or, without a URL, by
 * the revision's id as the body's model (a revision no Route sends traffic to has no Host yet).
 */
async function ask(url: string | undefined, name: string) {
  const started = performance.now();
  const send = url === undefined ? fetch : fetchVia(suite.activator.url);
  const response = await send(`${url ?? suite.activator.url}/v1/chat/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: name, messages: [{ role: "user", content: "hi" }], max_tokens: 2 }),
    signal: AbortSignal.timeout(60_000),
  });
  return { status: response.status, text: await response.text(), ms: performance.now() - started };
}

async function kubectl(...args: string[]): Promise<string> {
  const env = { ...process.env, KUBECONFIG: suite.cluster.info.kubeconfigPath };
  const { stdout } = await promisify(execFile)(suite.cluster.info.kubectl, [...args, "-n", ns()], { env });
  return stdout;
}

/** The row of `kubectl get <kind>` for `name`, split on whitespace. */
const row = (table: string, name: string) =>
  table
    .split("\n")
    .find((line) => line.startsWith(`${name} `))
    ?.trim()
    .split(/\s+/);

// `kubectl get revisions` waits: the Revision copies its replica counts from the PA on its own
// reconcile, a moment after the PA changed, so a row read right after the PA may still be stale.
const waitRevisionRow = (revision: string, expected: string[]) => {
  let last: string[] | undefined;
  return waitFor(
    async () => {
      last = row(await kubectl("get", "revisions"), revision);
      return JSON.stringify(last) === JSON.stringify(expected) ? last : undefined;
    },
    {
      what: `the Revision's row ${expected.join(" ")}`,
      timeoutMs: 20_000,
      intervalMs: 250,
      detail: () => `last row: ${last?.join(" ")}\n${logs()}`,
    },
  );
};

const waitPa = (
  revision: string,
  what: string,
  check: (pa: KnativeObject) => boolean,
  timeoutMs = 30_000,
) => {
  let last: KnativeObject | undefined;
  return waitFor(
    async () => {
      last = await client().get<KnativeObject>(paPath(revision));
      return check(last) ? last : undefined;
    },
    {
      what,
      timeoutMs,
      intervalMs: 200,
      detail: () => `PA status: ${JSON.stringify(last?.status)}\n${logs()}`,
    },
  );
};

/** Resolves to true when the object at `path` does not exist. */
const absent = (path: string) =>
  client()
    .get(path)
    .then(
      () => false,
      (error: unknown) => {
        if (isNotFound(error)) return true;
        throw error;
      },
    );

const scale = (pa: KnativeObject) => pa.status as { desiredScale?: number; actualScale?: number };

describe("Snooze's Knative autoscaler class", () => {
  const name = "sleepy";
  const revision = revisionOf(name);
  let url = "";
  let firstPod: Pod | undefined;

  test("a Snooze-class Service: its PA is Snooze's, the Revision and the Service Ready, and kubectl agrees", async () => {
    await createService(
      knativeService(name, {
        kubelet: suite.cluster.info.kubelet,
        args: args(name),
        annotations: {
          [classAnnotation]: autoscalerClass,
          "snooze.dev/sleep-after": "3s",
          "snooze.dev/deep-sleep-after": "never",
          "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "10s",
        },
      }),
    );
    url = await readyUrl(name);
    expect(url).toMatch(new RegExp(`^http://${name}\\.${ns()}\\.`));
    await waitForCondition(client(), `${servingApi}/namespaces/${ns()}/revisions/${revision}`, "Ready", {
      detail: logs,
    });

    // The PA: Snooze's class, its status written by Snooze.
    const pa = await waitPa(
      revision,
      "the PA initialized at desired 1, actual 1",
      (p) =>
        conditionOf(p, "ScaleTargetInitialized")?.status === "True" &&
        scale(p).desiredScale === 1 &&
        scale(p).actualScale === 1,
    );
    expect(pa.metadata.annotations?.[classAnnotation]).toBe(autoscalerClass);
    expect(conditionOf(pa, "SKSReady")?.status).toBe("True");
    // Awake (Active, so Ready) or, past sleepAfter already, asleep (Active False Asleep, as Ready).
    const active = conditionOf(pa, "Active");
    expect(active?.status === "True" || active?.reason === "Asleep", JSON.stringify(active)).toBe(true);
    expect(conditionOf(pa, "Ready")).toMatchObject({ status: active?.status });
    expect((pa.status as { serviceName?: string }).serviceName).toBe(revision);

    // Its Model: named as the revision, owned by the PA, scaling the revision's Deployment.
    const m = await model(revision);
    expect(m.spec.workloadRef).toEqual({
      apiVersion: "apps/v1",
      kind: "Deployment",
      name: `${revision}-deployment`,
    });
    expect(m.spec).toMatchObject({ sleepAfter: "3s", zeroAfter: "10s", port: 8080, servedModel: name });
    expect(m.metadata.ownerReferences).toEqual([
      expect.objectContaining({
        kind: "PodAutoscaler",
        name: revision,
        uid: (pa.metadata as { uid?: string }).uid,
      }),
    ]);
    // The SKS in Serve mode, owned by the PA.
    const sks = await client().get<KnativeObject & { spec: { mode: string } }>(
      `${networkingApi}/namespaces/${ns()}/serverlessservices/${revision}`,
    );
    expect(sks.spec.mode).toBe("Serve");

    const pods = await revisionPods(revision);
    expect(pods).toHaveLength(1);
    firstPod = pods[0];
    expect((await deployment(revision)).spec.replicas).toBe(1);

    // kubectl: the Service Ready with its URL, the revision's 1 actual / 1 desired, one pod, the Model.
    expect(row(await kubectl("get", "ksvc"), name)).toEqual([name, url, revision, revision, "True"]);
    // NAME CONFIG GENERATION READY REASON ACTUAL DESIRED (REASON empty when Ready).
    await waitRevisionRow(revision, [revision, name, "1", "True", "1", "1"]);
    expect(row(await kubectl("get", "pods"), firstPod!.metadata.name)?.slice(1, 3)).toEqual([
      "2/2",
      "Running",
    ]);
    const models = row(await kubectl("get", "models"), revision);
    expect(models?.[0]).toBe(revision);
  }, 200_000);

  test("a request by the Service's Host reaches the pod through the activator", async () => {
    const answer = await ask(url, name);
    expect(answer.status, answer.text).toBe(200);
    expect(JSON.parse(answer.text).model).toBe(name);
    const pa = await waitPa(
      revision,
      "the PA Active and Ready",
      (p) => conditionOf(p, "Ready")?.status === "True",
    );
    expect(conditionOf(pa, "Active")?.status).toBe("True");
    expect(scale(pa)).toMatchObject({ desiredScale: 1, actualScale: 1 });
  });

  test("idle: the pod sleeps and is not deleted; the PA says Asleep, the Revision stays Ready", async () => {
    const [pod] = await waitFor(
      async () =>
        ((p) => (p.length === 1 && tierOf(p[0] as KubePod) === "asleep-1" ? p : undefined))(
          await revisionPods(revision),
        ),
      { what: "the pod asleep", timeoutMs: 20_000, intervalMs: 200, detail: logs },
    );
    expect(pod!.metadata.uid).toBe(firstPod!.metadata.uid);
    expect(await engineAsleep(pod!)).toBe(true);
    const pa = await waitPa(
      revision,
      "the PA Active False Asleep",
      // Draining (Active False too) comes first and may still be the PA's status when the pod's
      // tier already says asleep: the PA follows the Model's status, written a sync later.
      (p) => conditionOf(p, "Active")?.status === "False" && conditionOf(p, "Active")?.reason === "Asleep",
    );
    expect(scale(pa)).toMatchObject({ desiredScale: 1, actualScale: 1 });
    // The PA's Ready follows Active, as the KPA's does at zero; the Revision's Ready does not.
    expect(conditionOf(pa, "Ready")).toMatchObject({ status: "False", reason: "Asleep" });
    const rev = await client().get<KnativeObject>(`${servingApi}/namespaces/${ns()}/revisions/${revision}`);
    expect(conditionOf(rev, "Ready")?.status).toBe("True");
    expect((await model(revision)).status?.phase).toBe("Asleep");
    const models = row(await kubectl("get", "models"), revision);
    // NAME READY WARMING SLEEPING PHASE AGE
    expect(models?.slice(1, 5)).toEqual(["0", "0", "1", "Asleep"]);
    expect((await deployment(revision)).spec.replicas).toBe(1);
  });

  test("a request wakes the same pod: answered, no new pod", async () => {
    const answer = await ask(url, name);
    expect(answer.status, answer.text).toBe(200);
    console.log(
      `e2e: a wake of a Knative revision's pod through the activator took ${Math.round(answer.ms)} ms`,
    );
    const pods = await revisionPods(revision);
    expect(pods.map((p) => p.metadata.uid)).toEqual([firstPod!.metadata.uid]);
    expect(tierOf(pods[0] as KubePod)).toBe("ready");
    expect(await engineAsleep(pods[0]!)).toBe(false);
    expect((await deployment(revision)).spec.replicas).toBe(1);
  });

  test("longer idle: scaled to zero through the Deployment; the PA at 0, the Revision still Ready; a request starts it again", async () => {
    await waitFor(async () => ((d) => (d.spec.replicas === 0 ? d : undefined))(await deployment(revision)), {
      what: "the Deployment scaled to 0",
      timeoutMs: 40_000,
      intervalMs: 250,
      detail: logs,
    });
    await waitFor(async () => ((p) => (p.length === 0 ? true : undefined))(await revisionPods(revision)), {
      what: "the pod gone",
      timeoutMs: 20_000,
      detail: logs,
    });
    const pa = await waitPa(
      revision,
      "the PA at 0",
      (p) => scale(p).desiredScale === 0 && scale(p).actualScale === 0,
    );
    expect(conditionOf(pa, "Active")).toMatchObject({ status: "False", reason: "NoTraffic" });
    const rev = await client().get<KnativeObject>(`${servingApi}/namespaces/${ns()}/revisions/${revision}`);
    expect(conditionOf(rev, "Ready")?.status).toBe("True");
    await waitRevisionRow(revision, [revision, name, "1", "True", "0", "0"]);

    const answer = await ask(url, name);
    expect(answer.status, answer.text).toBe(200);
    expect((await deployment(revision)).spec.replicas).toBe(1);
    expect(await revisionPods(revision)).toHaveLength(1);
  }, 90_000);
});

describe("min-scale", () => {
  test("min-scale 1: the pod sleeps when idle and stays, past the retention period", async () => {
    const name = "kept";
    const revision = revisionOf(name);
    await createService(
      knativeService(name, {
        kubelet: suite.cluster.info.kubelet,
        args: args(name),
        annotations: {
          [classAnnotation]: autoscalerClass,
          "autoscaling.knative.dev/min-scale": "1",
          "autoscaling.knative.dev/max-scale": "2",
          "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "2s",
          "snooze.dev/sleep-after": "2s",
        },
      }),
    );
    await waitForCondition(client(), `${servingApi}/namespaces/${ns()}/revisions/${revision}`, "Ready", {
      timeoutMs: 120_000,
      detail: logs,
    });
    const m = await waitFor(() => model(revision), { what: "the Model", timeoutMs: 10_000, detail: logs });
    expect(m.spec).toMatchObject({ minPods: 1, maxReplicas: 2, zeroAfter: "2s" });
    const [pod] = await waitFor(
      async () =>
        ((p) => (p.length === 1 && tierOf(p[0] as KubePod) === "asleep-1" ? p : undefined))(
          await revisionPods(revision),
        ),
      { what: "the pod asleep", timeoutMs: 30_000, intervalMs: 200, detail: logs },
    );
    const asleepAt = Date.now();
    // Past zeroAfter (2 s) three times over: still there, still asleep, the Deployment at 1.
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    const after = await revisionPods(revision);
    expect(after.map((p) => p.metadata.uid)).toEqual([pod!.metadata.uid]);
    expect(tierOf(after[0] as KubePod)).toBe("asleep-1");
    expect(await engineAsleep(after[0]!)).toBe(true);
    expect((await deployment(revision)).spec.replicas).toBe(1);
    const pa = await client().get<KnativeObject>(paPath(revision));
    expect(scale(pa)).toMatchObject({ desiredScale: 1, actualScale: 1 });
    expect(conditionOf(pa, "Active")?.reason).toBe("Asleep");
    expect(Date.now() - asleepAt).toBeGreaterThanOrEqual(6_000);
  }, 180_000);

  test("300 concurrent requests on a revision of max-scale 3, containerConcurrency 1: 1 → 3 → 1 pods, every one answered", async () => {
    const name = "burst";
    const revision = revisionOf(name);
    const service = knativeService(name, {
      kubelet: suite.cluster.info.kubelet,
      // 50 ms per request: one pod alone would take 15 s for the burst, so held demand asks for more.
      args: [...args(name).slice(0, -4), "--ttft", "50ms", "--itl", "1ms"],
      annotations: {
        [classAnnotation]: autoscalerClass,
        "autoscaling.knative.dev/min-scale": "1",
        "autoscaling.knative.dev/max-scale": "3",
        "autoscaling.knative.dev/window": "6s",
        "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "3s",
      },
    });
    // One request at a time per pod (Knative's hard limit, Snooze's concurrency).
    (service.spec.template.spec as { containerConcurrency?: number }).containerConcurrency = 1;
    await createService(service);
    const burstUrl = await readyUrl(name);
    expect((await model(revision)).spec).toMatchObject({ concurrency: 1, minPods: 1, maxReplicas: 3 });
    expect((await deployment(revision)).spec.replicas).toBe(1);

    // The Deployment's replicas, watched through the burst (bounded: every 100 ms until it ends).
    let most = 0;
    let done = false;
    const watching = (async () => {
      for (let i = 0; i < 1_200 && !done; i++) {
        most = Math.max(most, (await deployment(revision)).spec.replicas);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    })();
    const answers = await Promise.all(Array.from({ length: 300 }, () => ask(burstUrl, name)));
    done = true;
    await watching;
    const failed = answers.filter((a) => a.status !== 200);
    expect(failed.map((a) => `${a.status} ${a.text.slice(0, 200)}`)).toEqual([]);
    expect(answers.every((a) => JSON.parse(a.text).model === name)).toBe(true);
    // Held and in-flight requests over containerConcurrency ask for more pods: 1 → 3 (max-scale).
    expect(most).toBe(3);

    // Idle: the pods above min-scale sleep (window 6 s, the least Knative allows) and go (retention 3 s); one stays, asleep.
    await waitFor(
      async () => {
        const pods = await revisionPods(revision);
        return (await deployment(revision)).spec.replicas === 1 && pods.length === 1 ? pods : undefined;
      },
      { what: "the Deployment back at 1 pod", timeoutMs: 60_000, intervalMs: 250, detail: logs },
    );
    await waitPa(revision, "the PA at 1/1", (p) => scale(p).desiredScale === 1 && scale(p).actualScale === 1);
  }, 300_000);
});

describe("a slot", () => {
  test("two Snooze-class Services in one slot: both Ready, requests alternate between them, never two resident", async () => {
    const slot = "gpu-kn";
    await client().create(`${paths.custom(group, version, "slots", ns())}`, {
      apiVersion: `${group}/${version}`,
      kind: "Slot",
      metadata: { name: slot },
      spec: { policy: "sticky", minResidency: "0s", swapCooldown: "0s", drainTimeout: "10s" },
    });
    // One simulated GPU for both: a second awake engine does not fit, as with vLLM.
    const gpu = ["--gpu-id", slot, "--gpu-dir", join(suite.cluster.info.dir, "gpu"), "--gpu-memory", "24GiB"];
    const names = ["slot-a", "slot-b"];
    for (const name of names)
      await createService(
        knativeService(name, {
          kubelet: suite.cluster.info.kubelet,
          args: [...args(name), ...gpu],
          annotations: {
            [classAnnotation]: autoscalerClass,
            "snooze.dev/slot": slot,
            "snooze.dev/sleep-after": "1m",
          },
        }),
      );
    const urls: Record<string, string> = {};
    for (const name of names) {
      urls[name] = await readyUrl(name);
      // The webhook pinned the slot member's revision: at most one pod, none to begin with.
      expect((await model(revisionOf(name))).spec).toMatchObject({ slot, maxReplicas: 1 });
    }

    // Watch every pod of both revisions: at most one resident (awake, waking or starting) at once.
    // One list for both: two lists are two moments, and a swap between them looks like two resident.
    let most = 0;
    let worst = "";
    let done = false;
    const watching = (async () => {
      for (let i = 0; i < 3_000 && !done; i++) {
        const pods = await revisionPods(names.map(revisionOf));
        const residents = pods.filter((p) => isResident((tierOf(p as KubePod) ?? "starting") as Tier));
        if (residents.length > most) {
          most = residents.length;
          worst = residents.map((p) => `${p.metadata.name}=${tierOf(p as KubePod) ?? "(none)"}`).join(", ");
        }
        await new Promise((resolve) => setTimeout(resolve, 30));
      }
    })();
    try {
      for (const name of [...names, ...names]) {
        const answer = await ask(urls[name]!, name);
        expect(answer.status, `${name}: ${answer.text}\n${logs()}`).toBe(200);
        expect(JSON.parse(answer.text).model).toBe(name);
      }
    } finally {
      done = true;
      await watching;
    }
    expect(most, `two resident at once: ${worst}`).toBe(1);
  }, 300_000);
});

describe("a revision whose pod cannot start", () => {
  // An image no registry serves (the stand-in kubelet fails its pull in containerd's words), named
  // by digest so that Knative's controller does not resolve its tag first (that would fail before
  // any pod exists). startTimeout and the hold budget are 10 minutes: a request answered within
  // seconds was told why, not timed out.
  const image = `registry.invalid/vllm/vllm-openai@sha256:${"0".repeat(64)}`;
  const annotations = {
    [classAnnotation]: autoscalerClass,
    "snooze.dev/start-timeout": "10m",
    "snooze.dev/hold-budget": "10m",
  };
  const cannotPull =
    /pod \S+ cannot start: engine container "user-container": (ErrImagePull|ImagePullBackOff): .*"registry\.invalid\/vllm\/vllm-openai@sha256:0{64}".*no such host/;
  const service = (name: string, more: Record<string, string> = {}) =>
    knativeService(name, {
      kubelet: suite.cluster.info.kubelet,
      image,
      args: args(name),
      annotations: { ...annotations, ...more },
    });
  /** A request held for `revision`: 503 activation_failed with the kubelet's words, within seconds. */
  const failsAtOnce = async (url: string | undefined, name: string, revision: string) => {
    const answer = await ask(url, url === undefined ? revision : name);
    expect(answer.status, `${answer.text}\n${logs()}`).toBe(503);
    const { error } = JSON.parse(answer.text);
    expect(error.code).toBe("activation_failed");
    expect(error.message).toMatch(new RegExp(`start of ${revision} failed: ${cannotPull.source}`));
    expect(answer.ms).toBeLessThan(15_000);
    console.log(`e2e: ${revision}: 503 after ${Math.round(answer.ms)} ms: ${error.message}`);
  };
  /** The Deployment back at 0 and no pod left: nothing keeps pulling. */
  const scaledAway = (revision: string) =>
    waitFor(
      async () =>
        (await deployment(revision)).spec.replicas === 0 && (await revisionPods(revision)).length === 0
          ? true
          : undefined,
      { what: `${revision}'s pod scaled away`, timeoutMs: 20_000, intervalMs: 250, detail: logs },
    );
  const revisionObject = (revision: string) =>
    client().get<KnativeObject>(`${servingApi}/namespaces/${ns()}/revisions/${revision}`);

  test("routed, at zero (initial-scale 0): a request by its Host gets 503 activation_failed within seconds, the Model and the PA say why, the Revision stays Ready", async () => {
    const name = "unpulled";
    const revision = revisionOf(name);
    await createService(service(name, { "autoscaling.knative.dev/initial-scale": "0" }));
    // No pod is asked for until a request comes, so Knative sees nothing wrong: Ready and routed.
    const url = await readyUrl(name);
    await failsAtOnce(url, name, revision);
    const failed = await waitFor(
      async () => ((m) => (m.status?.phase === "Failed" ? m : undefined))(await model(revision)),
      { what: "the Model Failed", timeoutMs: 10_000, detail: logs },
    );
    expect(failed.status?.conditions?.find((c) => c.type === "ActivationFailed")).toMatchObject({
      status: "True",
      message: expect.stringMatching(cannotPull),
    });
    await scaledAway(revision);
    // The PA: Active False with the kubelet's words; its scale target was initialized (no pod
    // asked for), so Knative's revision reconciler keeps the Revision Ready (routable: the next
    // request tries again) and copies the PA's Active into the Revision's.
    const pa = await waitPa(
      revision,
      "the PA Active False ActivationFailed",
      (p) =>
        conditionOf(p, "Active")?.reason === "ActivationFailed" &&
        conditionOf(p, "Active")?.status === "False",
    );
    expect(conditionOf(pa, "Active")).toMatchObject({
      status: "False",
      message: expect.stringMatching(cannotPull),
    });
    expect(conditionOf(pa, "ScaleTargetInitialized")?.status).toBe("True");
    const rev = await waitFor(
      async () =>
        ((r) => (conditionOf(r, "Active")?.reason === "ActivationFailed" ? r : undefined))(
          await revisionObject(revision),
        ),
      { what: "the Revision's Active ActivationFailed", timeoutMs: 10_000, detail: logs },
    );
    expect(conditionOf(rev, "Active")?.message).toMatch(cannotPull);
    expect(conditionOf(rev, "Ready")?.status).toBe("True");
    expect(row(await kubectl("get", "ksvc"), name)).toEqual([name, url, revision, revision, "True"]);
    // The next request starts a pod again and is told again, as quickly.
    await failsAtOnce(url, name, revision);
    await scaledAway(revision);
  }, 120_000);

  test("a new Service's first pod cannot pull: a request by the revision's id gets 503 within seconds; the pod is kept and the PA Unknown with why, so Knative judges the revision at its progress deadline, with the kubelet's reason", async () => {
    const name = "unpullable";
    const revision = revisionOf(name);
    // Knative's progress deadline (default 10 minutes) at 5 s, to see its own verdict here.
    await createService(service(name, { "serving.knative.dev/progress-deadline": "5s" }));
    // Knative asks for one pod (initial-scale 1); it cannot pull. Snooze fails the start with the
    // kubelet's words but keeps the pod: the kubelet may yet pull it (the image pushed), and a PA
    // not Ready before the initial scale would make Knative fail the revision for good at once.
    const failing = await waitFor(
      async () =>
        ((m) =>
          m?.status?.conditions?.some((c) => c.type === "ActivationFailed" && c.status === "True")
            ? m
            : undefined)(await model(revision).catch(() => undefined)),
      { what: "the Model's ActivationFailed", timeoutMs: 30_000, detail: logs },
    );
    expect(failing.status?.conditions?.find((c) => c.type === "ActivationFailed")?.message).toMatch(
      cannotPull,
    );
    const pa = await waitPa(
      revision,
      "the PA Active Unknown ActivationFailed",
      (p) => conditionOf(p, "Active")?.reason === "ActivationFailed",
    );
    expect(conditionOf(pa, "Active")).toMatchObject({
      status: "Unknown",
      message: expect.stringMatching(cannotPull),
    });
    expect(conditionOf(pa, "Ready")?.status).toBe("Unknown");
    // A request by its id (no Route sends it traffic yet) is told at once, as often as it comes.
    await failsAtOnce(undefined, name, revision);
    expect((await deployment(revision)).spec.replicas).toBe(1);
    expect(await revisionPods(revision)).toHaveLength(1);

    // Past its progress deadline Knative's revision reconciler fails the revision itself, with the
    // kubelet's reason from the pod Snooze kept; Snooze's PA stays Unknown, Active says why.
    const rev = await waitFor(
      async () =>
        ((r) => (conditionOf(r, "Ready")?.status === "False" ? r : undefined))(
          await revisionObject(revision),
        ),
      { what: "Knative failing the Revision", timeoutMs: 30_000, detail: logs },
    );
    expect(conditionOf(rev, "Ready")).toMatchObject({
      reason: expect.stringMatching(/^(ImagePullBackOff|ErrImagePull)$/),
      message: expect.stringMatching(/registry\.invalid/),
    });
    expect(conditionOf(rev, "Active")).toMatchObject({
      status: "Unknown",
      reason: "ActivationFailed",
      message: expect.stringMatching(cannotPull),
    });
    const ksvc = await waitFor(
      async () => ((k) => (k?.[3] === "False" ? k : undefined))(row(await kubectl("get", "ksvc"), name)),
      { what: "kubectl get ksvc: not Ready", timeoutMs: 10_000, detail: logs },
    );
    // NAME URL LATESTCREATED READY REASON (no LATESTREADY); the reason is the Configuration's or
    // the Route's, whichever Knative's Service reconciler saw fail first (both seen).
    expect(ksvc.slice(2, 4)).toEqual([revision, "False"]);
    expect(["RevisionFailed", "RevisionMissing"]).toContain(ksvc[4]);
    const k = await client().get<KnativeObject>(`${servingApi}/namespaces/${ns()}/services/${name}`);
    expect(conditionOf(k, "ConfigurationsReady")?.message).toMatch(
      new RegExp(`Revision "${revision}" failed with message: .*registry\\.invalid`),
    );
    console.log(
      `e2e: ${name}: Revision Ready ${JSON.stringify(conditionOf(rev, "Ready"))}; kubectl get ksvc: ${ksvc.join(" ")}`,
    );
    // Snooze does not undo it: a second later the Revision is still failed, the PA still Unknown.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(conditionOf(await revisionObject(revision), "Ready")?.status).toBe("False");
    expect(conditionOf(await client().get<KnativeObject>(paPath(revision)), "Ready")?.status).toBe("Unknown");
    // 30 s past the progress deadline (startTimeout is 10 minutes) the kept pod goes, as Knative's
    // KPA scales such a revision to zero: Knative has judged it, and the Revision stays failed (with
    // no pod left to read, Knative's reconciler says its own ProgressDeadlineExceeded, seen here).
    await waitFor(
      async () =>
        (await deployment(revision)).spec.replicas === 0 && (await revisionPods(revision)).length === 0
          ? true
          : undefined,
      {
        what: `${revision}'s kept pod gone past its progress deadline`,
        timeoutMs: 60_000,
        intervalMs: 500,
        detail: logs,
      },
    );
    // Snooze's PA goes False as it lets the pod go (from its own scale to zero); the Deployment
    // controller's Progressing True (complete at zero) races it to Knative's revision reconciler,
    // which may read that first and say Unknown "Deploying" for the moment between (so would
    // Knative's own KPA, which also scales before it writes its status).
    const failedForGood = await waitFor(
      async () =>
        ((r) => (r?.status === "False" ? r : undefined))(
          conditionOf(await revisionObject(revision), "Ready"),
        ),
      {
        what: "the Revision still failed once its pod is gone",
        timeoutMs: 5_000,
        intervalMs: 100,
        detail: logs,
      },
    );
    expect(failedForGood.reason).toMatch(/^(ImagePullBackOff|ErrImagePull|ProgressDeadlineExceeded)$/);
  }, 180_000);

  test("a new Service's first pod names a Secret not there yet (CreateContainerConfigError): told at once, the pod kept; once the Secret is created the same pod comes up and the Service gets Ready", async () => {
    const name = "unconfigured";
    const revision = revisionOf(name);
    const withSecret = knativeService(name, {
      kubelet: suite.cluster.info.kubelet,
      args: args(name),
      annotations,
    });
    const container = withSecret.spec.template.spec.containers[0] as { env: unknown[] };
    container.env = [
      ...container.env,
      { name: "HF_TOKEN", valueFrom: { secretKeyRef: { name: "hf-token", key: "token" } } },
    ];
    await createService(withSecret);
    const missing =
      /pod \S+ cannot start: engine container "user-container": CreateContainerConfigError: secret "hf-token" not found/;
    const failing = await waitFor(
      async () =>
        ((m) =>
          m?.status?.conditions?.some((c) => c.type === "ActivationFailed" && c.status === "True")
            ? m
            : undefined)(await model(revision).catch(() => undefined)),
      { what: "the Model's ActivationFailed", timeoutMs: 30_000, detail: logs },
    );
    expect(failing.status?.conditions?.find((c) => c.type === "ActivationFailed")?.message).toMatch(missing);
    await waitPa(
      revision,
      "the PA Active Unknown ActivationFailed",
      (p) =>
        conditionOf(p, "Active")?.reason === "ActivationFailed" &&
        conditionOf(p, "Active")?.status === "Unknown",
    );
    const kept = await revisionPods(revision);
    expect(kept).toHaveLength(1);
    const answer = await ask(undefined, revision);
    expect(answer.status, answer.text).toBe(503);
    expect(JSON.parse(answer.text).error).toMatchObject({
      code: "activation_failed",
      message: expect.stringMatching(missing),
    });
    expect(answer.ms).toBeLessThan(15_000);
    console.log(
      `e2e: ${revision}: 503 after ${Math.round(answer.ms)} ms: ${JSON.parse(answer.text).error.message}`,
    );

    // The Secret arrives: the kubelet starts the kept pod, Snooze finishes its start, and Knative
    // sees the initial scale reached: the Revision and the Service Ready, answered by the Host.
    const created = performance.now();
    await client().create(paths.secrets(ns()), {
      apiVersion: "v1",
      kind: "Secret",
      metadata: { name: "hf-token" },
      stringData: { token: "t" },
    });
    const url = await readyUrl(name);
    console.log(
      `e2e: ${name}: Ready ${Math.round(performance.now() - created)} ms after its Secret was created`,
    );
    expect((await revisionPods(revision)).map((p) => p.metadata.uid)).toEqual([kept[0]!.metadata.uid]);
    const served = await ask(url, name);
    expect(served.status, served.text).toBe(200);
  }, 120_000);
});

describe("PodAutoscalers that are not Snooze's", () => {
  test("a Service without the class is Knative's: a KPA PodAutoscaler whose status the KPA writes, no Model", async () => {
    const name = "plain";
    const revision = revisionOf(name);
    await createService(
      knativeService(name, {
        kubelet: suite.cluster.info.kubelet,
        args: args(name),
        annotations: { "autoscaling.knative.dev/min-scale": "1" },
      }),
    );
    // The KPA reconciles it: its desired scale is min-scale (Snooze writes no status to this PA).
    const pa = await waitPa(
      revision,
      "the KPA's PA at desired 1",
      (p) => scale(p).desiredScale === 1,
      60_000,
    );
    expect(pa.metadata.annotations?.[classAnnotation]).toBe(kpaClass);
    await waitFor(async () => ((p) => (p.length === 1 ? p : undefined))(await revisionPods(revision)), {
      what: "the KPA revision's pod",
      timeoutMs: 30_000,
      detail: logs,
    });
    // With Knative's activator Endpoints present (empty, as without a ready activator pod), its SKS
    // reconciler gets past them: the KPA's PA becomes Ready, its SKS serving the pod.
    const ready = await waitPa(
      revision,
      "the KPA's PA Ready",
      (p) => conditionOf(p, "Ready")?.status === "True",
      60_000,
    );
    expect(conditionOf(ready, "SKSReady")?.status).toBe("True");
    // Long enough for Snooze's reconciler to have acted, had it taken this PA for its own.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    expect(await absent(modelPath(revision))).toBe(true);
    for (const pod of await revisionPods(revision)) expect(tierOf(pod as KubePod)).toBeUndefined();
    const state = (await suite.autoscaler.state()) as { models: { model: string; object?: string }[] };
    expect(state.models.map((m) => m.model)).toContain(revisionOf("sleepy"));
    expect(state.models.filter((m) => m.model === revision || m.object?.endsWith(`/${revision}`))).toEqual(
      [],
    );
  }, 120_000);

  test("a class Snooze does not serve is ignored: no Model, no SKS, no status from Snooze", async () => {
    const name = "other";
    const revision = revisionOf(name);
    await createService(
      knativeService(name, {
        kubelet: suite.cluster.info.kubelet,
        args: args(name),
        annotations: { [classAnnotation]: "other.example.com", "snooze.dev/sleep-after": "2s" },
      }),
    );
    await waitFor(() => client().get<KnativeObject>(paPath(revision)), {
      what: "the PodAutoscaler",
      timeoutMs: 30_000,
      detail: logs,
    });
    // Long enough for Snooze's reconciler to have acted, had it taken this PA for its own.
    await new Promise((resolve) => setTimeout(resolve, 3_000));
    const pa = await client().get<KnativeObject>(paPath(revision));
    expect(pa.metadata.annotations?.[classAnnotation]).toBe("other.example.com");
    expect(pa.status?.conditions ?? []).toEqual([]);
    expect(await absent(modelPath(revision))).toBe(true);
    expect(await absent(`${networkingApi}/namespaces/${ns()}/serverlessservices/${revision}`)).toBe(true);
  }, 60_000);
});

describe("scale bounds as the KPA has them", () => {
  /** The Deployment at `replicas` and that many live pods of the revision. */
  const podsAt = (revision: string, replicas: number, what: string, timeoutMs = 60_000) =>
    waitFor(
      async () => {
        const pods = await revisionPods(revision);
        return (await deployment(revision)).spec.replicas === replicas && pods.length === replicas
          ? pods
          : undefined;
      },
      { what, timeoutMs, intervalMs: 250, detail: logs },
    );
  const modelSpecOf = (revision: string, what: string, check: (spec: Model["spec"]) => boolean) => {
    let last: Model["spec"] | undefined;
    return waitFor(
      async () => {
        last = (await model(revision).catch(() => undefined))?.spec;
        return last && check(last) ? last : undefined;
      },
      {
        what,
        timeoutMs: 30_000,
        intervalMs: 200,
        detail: () => `Model spec: ${JSON.stringify(last)}\n${logs()}`,
      },
    );
  };
  const reachability = (pa: KnativeObject) => (pa as { spec?: { reachability?: string } }).spec?.reachability;

  test("after a rollout the old revision is Unreachable: its min-scale pod goes when idle; routed again, min-scale keeps one", async () => {
    const name = "rolled";
    const [first, second] = [revisionOf(name), `${name}-00002`];
    const annotations = {
      [classAnnotation]: autoscalerClass,
      "autoscaling.knative.dev/min-scale": "1",
      "autoscaling.knative.dev/scale-to-zero-pod-retention-period": "2s",
      "snooze.dev/sleep-after": "2s",
    };
    const service = (loadTime: string) => {
      const s = knativeService(name, { kubelet: suite.cluster.info.kubelet, args: args(name), annotations });
      const container = s.spec.template.spec.containers[0]!;
      container.args = container.args.map((a, i, all) => (all[i - 1] === "--load-time" ? loadTime : a));
      return s;
    };
    await createService(service("500ms"));
    await readyUrl(name);
    await modelSpecOf(first, "the first revision's Model with min-scale 1", (spec) => spec.minPods === 1);

    // A new revision (a changed container); the Route moves to it once it is Ready.
    await client().patch(`${servingApi}/namespaces/${ns()}/services/${name}`, {
      spec: { template: { spec: { containers: service("400ms").spec.template.spec.containers } } },
    });
    await waitFor(
      async () => {
        const k = await client().get<KnativeObject>(`${servingApi}/namespaces/${ns()}/services/${name}`);
        const status = k.status as {
          latestReadyRevisionName?: string;
          traffic?: { revisionName?: string }[];
        };
        return conditionOf(k, "Ready")?.status === "True" &&
          status.latestReadyRevisionName === second &&
          status.traffic?.every((t) => t.revisionName === second)
          ? k
          : undefined;
      },
      { what: "the Service Ready on its second revision", timeoutMs: 120_000, intervalMs: 250, detail: logs },
    );
    await waitPa(first, "the first revision's PA Unreachable", (pa) => reachability(pa) === "Unreachable");
    // Knative's KPA ignores min-scale for an unreachable revision; so does its Model.
    const spec = await modelSpecOf(first, "the first revision's Model without minPods", (s) => !s.minPods);
    expect(spec).toMatchObject({ zeroAfter: "2s", sleepAfter: "2s" });
    // Idle 2 s, asleep; 2 s later, stopped: the Deployment at 0, the PA at 0.
    await podsAt(first, 0, "the first revision at 0 pods");
    await waitPa(
      first,
      "the first revision's PA at 0/0",
      (p) => scale(p).desiredScale === 0 && scale(p).actualScale === 0,
    );
    // The routed revision keeps its min-scale pod.
    expect((await model(second)).spec.minPods).toBe(1);
    expect(await revisionPods(second)).toHaveLength(1);

    // Traffic pinned back to the first revision: reachable again, so min-scale starts its pod again.
    await client().patch(`${servingApi}/namespaces/${ns()}/services/${name}`, {
      spec: { traffic: [{ revisionName: first, percent: 100 }] },
    });
    await waitPa(
      first,
      "the first revision's PA Reachable",
      (pa) => reachability(pa) === "Reachable",
      60_000,
    );
    await modelSpecOf(first, "the first revision's Model with minPods 1 again", (s) => s.minPods === 1);
    await podsAt(first, 1, "the first revision at 1 pod again");
  }, 300_000);

  test("config-autoscaler's min-scale, max-scale, stable-window and retention apply where the annotations say nothing, a change applies at once, and one Knative would refuse is not taken", async () => {
    const name = "defaulted";
    const revision = revisionOf(name);
    // Knative's config keys as Snooze's defaults: sleepAfter and zeroAfter of a revision without the annotations.
    const windows = { "stable-window": "6s", "scale-to-zero-pod-retention-period": "2s" };
    const configMapPath = `${paths.configMaps(knativeNamespace)}/config-autoscaler`;
    // Knative's config webhook validates the config maps with this label (autoscaler, controller, ...).
    const webhookLabel = "app.kubernetes.io/component";
    const autoscaler = () => suite.autoscalers.get("autoscaler-a")!;
    const snoozeState = async () =>
      (await autoscaler().state()) as { knative: { configProblem?: string; defaults: unknown } };
    const snoozeLog = () => autoscaler().process.tail(400);
    try {
      await knative!.configure("config-autoscaler", { "min-scale": "1", "max-scale": "3", ...windows });
      await createService(
        knativeService(name, {
          kubelet: suite.cluster.info.kubelet,
          args: args(name),
          annotations: { [classAnnotation]: autoscalerClass },
        }),
      );
      await readyUrl(name);
      await modelSpecOf(
        revision,
        "the Model with the cluster's min-scale 1, max-scale 3, stable-window and retention",
        (spec) =>
          spec.minPods === 1 && spec.maxReplicas === 3 && spec.sleepAfter === "6s" && spec.zeroAfter === "2s",
      );
      // Idle: the one pod sleeps and stays, past the retention period three times over.
      const [pod] = await waitFor(
        async () =>
          ((p) => (p.length === 1 && tierOf(p[0] as KubePod) === "asleep-1" ? p : undefined))(
            await revisionPods(revision),
          ),
        { what: "the pod asleep", timeoutMs: 30_000, intervalMs: 200, detail: logs },
      );
      await new Promise((resolve) => setTimeout(resolve, 6_000));
      expect((await revisionPods(revision)).map((p) => p.metadata.uid)).toEqual([pod!.metadata.uid]);
      expect((await deployment(revision)).spec.replicas).toBe(1);

      // Knative's defaults again (none, no limit), without restarting anything: no floor, Snooze's max.
      await knative!.configure("config-autoscaler", { "min-scale": "0", "max-scale": "0" });
      const spec = await modelSpecOf(
        revision,
        "the Model without the cluster's bounds",
        (s) => !s.minPods && (s.maxReplicas ?? 1) === 1,
      );
      expect(spec).toMatchObject({ sleepAfter: "6s", zeroAfter: "2s" });
      await podsAt(revision, 0, "the revision at 0 pods once min-scale is gone");

      // Values Knative refuses. Its config webhook turns them away at the door, with its reason:
      await expect(knative!.configure("config-autoscaler", { "stable-window": "2s" })).rejects.toThrow(
        /stable-window = 2s, must be in \[6s; 1h0m0s\] range/,
      );
      // Past it (a ConfigMap without the label the webhook selects by, as one written while no
      // webhook ran), Snooze keeps what it read before and says why: in its log and its state.
      await client().patch(configMapPath, { metadata: { labels: { [webhookLabel]: null } } });
      const invalid = [
        [
          { "stable-window": "6.5s" },
          "stable-window = 6.5s, must be specified with at most second precision",
        ],
        [{ "stable-window": "2s" }, "stable-window = 2s, must be in [6s; 1h0m0s] range"],
        [
          { "stable-window": "7s", "scale-to-zero-pod-retention-period": "-1s" },
          "scale-to-zero-pod-retention-period cannot be negative, was: -1s",
        ],
      ] as const;
      for (const [data, problem] of invalid) {
        await knative!.configure("config-autoscaler", data);
        await waitFor(
          async () =>
            ((state) => (state.knative.configProblem === problem ? state : undefined))(await snoozeState()),
          { what: `Snooze's state saying ${problem}`, timeoutMs: 10_000, intervalMs: 100, detail: logs },
        );
        expect(snoozeLog()).toContain(JSON.stringify(problem));
        expect((await model(revision)).spec).toMatchObject({ sleepAfter: "6s", zeroAfter: "2s" });
        // Knative's own autoscaler keeps the config it had too, for the same reason in the same words.
        await waitFor(async () => knative!.autoscaler.tail(400).includes(problem) || undefined, {
          what: `Knative's autoscaler logging ${problem}`,
          timeoutMs: 10_000,
          detail: logs,
        });
      }
      expect(snoozeLog()).toContain(
        "Knative's config-autoscaler is not valid; keeping the defaults read before",
      );
      // A valid value again applies at once.
      await knative!.configure("config-autoscaler", { "scale-to-zero-pod-retention-period": "3s" });
      await modelSpecOf(
        revision,
        "the Model with the later valid stable-window 7s and retention 3s",
        (s) => s.sleepAfter === "7s" && s.zeroAfter === "3s",
      );
      expect((await snoozeState()).knative.configProblem).toBeUndefined();
    } finally {
      // null takes the keys out again (valid values only, so the webhook, back with its label, passes it).
      await knative?.configure("config-autoscaler", {
        "min-scale": "0",
        "max-scale": "0",
        ...Object.fromEntries(Object.keys(windows).map((key) => [key, null])),
      });
      await client().patch(configMapPath, { metadata: { labels: { [webhookLabel]: "autoscaler" } } });
    }
  }, 240_000);
});
