import { spawn } from "node:child_process";
import { join } from "node:path";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  type KubeConfig,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { Agent, fetch } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { group, version } from "../../lib/kube/api-group.ts";
import { secretData } from "../../webhooks/certs/cert-store.ts";
import { kubeconfigFor } from "./harness/kubeconfig.ts";
import { errorText } from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import type { ManagedProcess } from "./harness/process.ts";
import { suiteCluster } from "./harness/suite.ts";
import { waitFor } from "./harness/wait.ts";
import {
  certSecret,
  installSnoozeIdentity,
  registerWebhooks,
  startWebhooksProcess,
  system,
  waitForReadyLog,
  webhooksKubeconfig,
} from "./webhooks-fixture.ts";

/**
 * Every webhook rule against the real apiserver: config/webhooks' configurations (with a loopback
 * url), `snooze webhooks` as its own process with its own ServiceAccount and RBAC, and writes made
 * the way people and controllers make them (kubectl, the scale subresource, a bound token of the
 * autoscaler's ServiceAccount).
 */
const cluster = suiteCluster();
let ns: Awaited<ReturnType<typeof createTestNamespace>>;
let doomed: Awaited<ReturnType<typeof createTestNamespace>>;
let webhooks: ManagedProcess;
let removeConfigurations: () => Promise<void> = async () => {};
let custom: CustomObjectsApi;
let apps: AppsV1Api;
let core: CoreV1Api;
let port: number;

async function kubectl(args: string[], input?: string) {
  return new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
    const child = spawn(cluster.info.kubectl, args, {
      env: { ...process.env, KUBECONFIG: cluster.info.kubeconfigPath },
      stdio: ["pipe", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
    child.stdin.end(input ?? "");
  });
}

const apply = (yaml: string) => kubectl(["apply", "-n", ns.name, "-f", "-"], yaml);

const deploymentYaml = (
  name: string,
  replicas: number,
  annotations: Record<string, string> = {},
  image = "vllm/vllm-openai:v0.11.0",
) => `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
  annotations: ${JSON.stringify(annotations)}
spec:
  replicas: ${replicas}
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec:
      containers: [{name: engine, image: "${image}", args: ["--model", "${name}"]}]
`;

async function createModel(name: string, spec: Record<string, unknown>, namespace = ns.name) {
  return custom.createNamespacedCustomObject({
    group,
    version,
    namespace,
    plural: "models",
    body: {
      apiVersion: `${group}/${version}`,
      kind: "Model",
      metadata: { name },
      spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name }, ...spec },
    },
  });
}

async function setStatus(
  plural: "models" | "slots",
  name: string,
  status: Record<string, unknown>,
  namespace = ns.name,
) {
  await custom.patchNamespacedCustomObjectStatus(
    { group, version, namespace, plural, name, body: { status } },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );
}

const tiers = (tier: string) => ({
  replicaTiers: [{ pod: "p-0", tier, since: "2026-01-01T00:00:00Z" }],
});

async function createSlot(name: string, spec: Record<string, unknown> = {}) {
  await custom.createNamespacedCustomObject({
    group,
    version,
    namespace: ns.name,
    plural: "slots",
    body: { apiVersion: `${group}/${version}`, kind: "Slot", metadata: { name }, spec },
  });
}

const replicasOf = async (name: string) =>
  (await apps.readNamespacedDeployment({ namespace: ns.name, name })).spec?.replicas;

const scaleAs = async (kc: KubeConfig, name: string, replicas: number) =>
  kc
    .makeApiClient(AppsV1Api)
    .patchNamespacedDeploymentScale(
      { namespace: ns.name, name, body: { spec: { replicas } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );

beforeAll(async () => {
  await installSnoozeIdentity(cluster);
  custom = cluster.admin.makeApiClient(CustomObjectsApi);
  apps = cluster.admin.makeApiClient(AppsV1Api);
  core = cluster.admin.makeApiClient(CoreV1Api);
  ns = await createTestNamespace(cluster.admin, "snooze-e2e-webhooks");
  doomed = await createTestNamespace(cluster.admin, "snooze-e2e-webhooks-doomed");
  for (const name of [ns.name, doomed.name]) {
    await core.patchNamespace(
      { name, body: { metadata: { labels: { "snooze.dev/webhooks": "enabled" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  }
  port = await freePort();
  removeConfigurations = await registerWebhooks(cluster.admin, port, [ns.name, doomed.name]);
  webhooks = startWebhooksProcess({
    kubeconfigPath: await webhooksKubeconfig(cluster, "webhooks-rules.kubeconfig"),
    port,
    logPath: join(cluster.info.dir, "snooze-webhooks-rules.log"),
  });
  await waitForReadyLog(webhooks);
  // Until the apiserver trusts the CA bundle and reaches the webhook.
  await waitFor(
    async () => {
      const result = await kubectl(
        ["apply", "--dry-run=server", "-n", ns.name, "-f", "-"],
        deploymentYaml("probe", 0, { "snooze.dev/sleep-after": "soon" }),
      );
      return /has invalid snooze\.dev annotations/.test(result.stderr) ? true : undefined;
    },
    {
      what: "the apiserver calling the webhooks",
      timeoutMs: 30_000,
      intervalMs: 250,
      detail: () => webhooks.tail(),
    },
  );
});

afterAll(async () => {
  // Configurations first: with failurePolicy Fail they would refuse writes once the process is gone.
  await removeConfigurations();
  await webhooks?.stop();
  await ns?.remove();
  await doomed?.remove();
});

describe("validation with the one schema", () => {
  test("a Deployment's snooze.dev annotations: field path, bad value, allowed form", async () => {
    const result = await apply(
      deploymentYaml("bad-annotations", 0, {
        "snooze.dev/sleep-after": "soon",
        "snooze.dev/sleep-level": "3",
      }),
    );
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      'admission webhook "workloads.validate.snooze.dev" denied the request: Deployment "bad-annotations" has invalid snooze.dev annotations: ' +
        'metadata.annotations["snooze.dev/sleep-after"]: "soon": expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"; ' +
        'metadata.annotations["snooze.dev/sleep-level"]: "3": expected 1 or 2',
    );
  });

  test("a Knative Service's revision template annotations, and an unknown annotation", async () => {
    const result = await apply(`
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: ksvc, annotations: {snooze.dev/slep-after: 5m}}
spec:
  template:
    metadata: {annotations: {snooze.dev/warmup: maybe}}
`);
    expect(result.stderr).toContain(
      'Service "ksvc" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/slep-after"]: "5m": unknown setting; did you mean snooze.dev/sleep-after?; known:',
    );
    expect(result.stderr).toContain(
      'spec.template.metadata.annotations["snooze.dev/warmup"]: "maybe": expected true or false',
    );
  });

  test("a valid Slot passes; the CRD refuses a bad one before the webhook with the same schema", async () => {
    await createSlot("valid-slot", { policy: "fifo", device: "0" });
    const result = await kubectl(
      ["apply", "-n", ns.name, "-f", "-"],
      `apiVersion: ${group}/${version}\nkind: Slot\nmetadata: {name: bad}\nspec: {policy: lifo}\n`,
    );
    expect(result.stderr).toMatch(/spec\.policy: Unsupported value: "lifo"/);
  });

  test("a Slot's device is one GPU; a workload's model id and slot are names Snooze can use", async () => {
    // Found by an outside tester: `device: all` gave member pods every GPU; `snooze.dev/model: x y`
    // made no Model and told nobody; `snooze.dev/slot: GPU-0` named a slot no Slot can be.
    const device = await kubectl(
      ["apply", "-n", ns.name, "-f", "-"],
      `apiVersion: ${group}/${version}\nkind: Slot\nmetadata: {name: every-gpu}\nspec: {device: all}\n`,
    );
    expect(device.stderr).toMatch(/spec\.device: Invalid value: "all": spec\.device in body should match/);
    const result = await apply(
      deploymentYaml("bad-names", 0, { "snooze.dev/model": "x y", "snooze.dev/slot": "GPU-0" }),
    );
    expect(result.stderr).toContain(
      'Deployment "bad-names" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/model"]: "x y": a model id may not contain whitespace; ' +
        'metadata.annotations["snooze.dev/slot"]: "GPU-0": a slot is named as its Slot object is',
    );
  });

  test("a Model in a slot may not ask for more than one replica", async () => {
    await expect(createModel("wide", { slot: "gpu-wide", maxReplicas: 2 })).rejects.toSatisfy(
      (error: unknown) =>
        errorText(error).includes(
          'admission webhook "models.validate.snooze.dev" denied the request: Model "wide" is in slot "gpu-wide" and may ask for at most one replica, but spec.maxReplicas is 2.',
        ),
    );
    await createModel("narrow", { slot: "gpu-wide", maxReplicas: 1 });
  });
});

describe("a count or a scaler above a Model's maxReplicas", () => {
  /** An HPA on the Model `name` that may ask for up to `maxReplicas`. */
  const hpaFor = (name: string, maxReplicas: number) => `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: ${name}}
spec:
  scaleTargetRef: {apiVersion: ${group}/${version}, kind: Model, name: ${name}}
  minReplicas: 1
  maxReplicas: ${maxReplicas}
  metrics:
    - type: External
      external:
        metric: {name: snooze_demand}
        target: {type: AverageValue, averageValue: "2"}
`;
  test("a Model without spec.replicas reads 0 through its scale subresource; kubectl scale and an HPA above maxReplicas are allowed with a warning", async () => {
    await createModel("capped", { maxReplicas: 2 });
    const read = await kubectl([
      "get",
      "-n",
      ns.name,
      "--raw",
      `/apis/${group}/${version}/namespaces/${ns.name}/models/capped/scale`,
    ]);
    expect(read.code, read.stderr).toBe(0);
    // autoscaling/v1 Scale leaves a 0 out (omitempty); before the CRD's default this GET was a 500.
    expect(JSON.parse(read.stdout)).toMatchObject({ kind: "Scale", metadata: { name: "capped" } });
    expect(JSON.parse(read.stdout).spec.replicas ?? 0).toBe(0);

    const scaled = await kubectl(["scale", "-n", ns.name, "model/capped", "--replicas=5"]);
    expect(scaled.code, scaled.stderr).toBe(0);
    expect(scaled.stderr).toContain(
      'Warning: Model "capped": spec.replicas 5 is above spec.maxReplicas 2: at most 2 replicas run',
    );
    const hpa = await apply(hpaFor("capped", 6));
    expect(hpa.code, hpa.stderr).toBe(0);
    expect(hpa.stderr).toContain(
      'Warning: HorizontalPodAutoscaler "capped" may ask Model "capped" for 6 replicas (spec.maxReplicas), but the Model\'s spec.maxReplicas is 2',
    );
    const within = await apply(hpaFor("capped", 2));
    expect(within.code, within.stderr).toBe(0);
    expect(within.stderr).not.toContain("Warning");
    await kubectl(["delete", "-n", ns.name, "hpa/capped", "--wait=false"]);
  });

  test("an HPA whose scaleTargetRef is a Model's Deployment, not the Model: allowed, with a warning naming the Model to scale", async () => {
    await createModel("direct", {});
    const hpa = `
apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: direct}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: direct}
  minReplicas: 1
  maxReplicas: 2
  metrics:
    - type: Resource
      resource: {name: cpu, target: {type: Utilization, averageUtilization: 80}}
`;
    // The webhooks know Models from their watch: applied again until it has seen this one.
    let last: { code: number | null; stderr: string } = { code: 0, stderr: "" };
    await waitFor(
      async () => {
        last = await apply(hpa);
        return last.stderr.includes("Warning") ? true : undefined;
      },
      { what: "the HPA's warning", timeoutMs: 10_000, intervalMs: 250, detail: () => last.stderr },
    );
    expect(last.code, last.stderr).toBe(0);
    expect(last.stderr).toContain(
      'Warning: HorizontalPodAutoscaler "direct" scales Deployment "direct" (spec.scaleTargetRef), the workload of Model "direct": ' +
        "Snooze sets its replicas itself",
    );
    expect(last.stderr).toContain(
      `Scale the Model instead: spec.scaleTargetRef {apiVersion: ${group}/${version}, kind: Model, name: direct}`,
    );
    // Aimed at a Deployment no Model names: nothing to say.
    const other = await apply(
      hpa
        .replace("kind: Deployment, name: direct}", "kind: Deployment, name: unmanaged}")
        .replace("metadata: {name: direct}", "metadata: {name: other}"),
    );
    expect(other.code, other.stderr).toBe(0);
    expect(other.stderr).not.toContain("Warning");
    await kubectl(["delete", "-n", ns.name, "hpa/direct", "hpa/other", "--wait=false"]);
  });
});

describe("one resident per slot", () => {
  let autoscaler: KubeConfig;
  // A slot name of this test's own: its Lease lives in snooze-system, beside other tests' Leases.
  let slot: string;
  const coordination = () => cluster.admin.makeApiClient(CoordinationV1Api);

  beforeAll(async () => {
    slot = `gpu-${ns.name.slice(-5)}`;
    await createSlot(slot, { device: "0" });
    await createModel("llama", { slot });
    await setStatus("models", "llama", tiers("ready"));
    expect((await apply(deploymentYaml("qwen", 0, { "snooze.dev/slot": slot }))).code).toBe(0);
    await createModel("mistral", { slot, replicas: 0 });

    // The autoscaler as a pod of its ServiceAccount: a token bound to that pod carries its name.
    const pod = await core.createNamespacedPod({
      namespace: system,
      body: {
        metadata: { name: `snooze-autoscaler-${ns.name.slice(-5)}` },
        spec: {
          serviceAccountName: "snooze-autoscaler",
          securityContext: {
            runAsNonRoot: true,
            runAsUser: 65532,
            seccompProfile: { type: "RuntimeDefault" },
          },
          containers: [
            {
              name: "autoscaler",
              image: "snooze",
              securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ["ALL"] } },
            },
          ],
        },
      },
    });
    const token = await core.createNamespacedServiceAccountToken({
      namespace: system,
      name: "snooze-autoscaler",
      body: {
        spec: {
          audiences: [],
          expirationSeconds: 3_600,
          boundObjectRef: {
            apiVersion: "v1",
            kind: "Pod",
            name: pod.metadata!.name!,
            uid: pod.metadata!.uid!,
          },
        },
      },
    });
    autoscaler = kubeconfigFor(
      { server: cluster.info.server, caPem: cluster.info.caPem },
      "system:serviceaccount:snooze-system:snooze-autoscaler",
      { token: token.status!.token! },
    );
    await coordination().createNamespacedLease({
      namespace: system,
      body: {
        metadata: { name: `snooze-slot-${slot}` },
        spec: { holderIdentity: pod.metadata!.name!, leaseDurationSeconds: 15 },
      },
    });
  });

  afterAll(async () => {
    await core
      .deleteNamespacedPod({ namespace: system, name: `snooze-autoscaler-${ns.name.slice(-5)}` })
      .catch(() => {});
  });

  test("`kubectl scale` of a second member is denied with the slot, the resident and how to swap", async () => {
    const result = await kubectl(["scale", "-n", ns.name, "deployment/qwen", "--replicas=1"]);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      `admission webhook "scale.validate.snooze.dev" denied the request: slot "${slot}" already has a resident: Model "llama" (ready); ` +
        'changing spec.replicas (scale) from 0 to 1 of Deployment "qwen" would make a second member resident. ' +
        `Only the Snooze autoscaler that holds the Lease snooze-slot-${slot} swaps members. ` +
        'To switch, ask for a swap: send a request for model "qwen" through the activator, or POST /snooze/v1/models/qwen/wake on the activator.',
    );
    expect(await replicasOf("qwen")).toBe(0);
  });

  test("the same through a full update, and through a Model's scale subresource", async () => {
    const update = await apply(deploymentYaml("qwen", 1, { "snooze.dev/slot": slot }));
    expect(update.stderr).toContain(
      `denied the request: slot "${slot}" already has a resident: Model "llama" (ready); changing spec.replicas from 0 to 1 of Deployment "qwen"`,
    );
    const model = await kubectl(["scale", "-n", ns.name, "models.snooze.dev/mistral", "--replicas=1"]);
    expect(model.stderr).toContain(
      `admission webhook "models-scale.validate.snooze.dev" denied the request: slot "${slot}" already has a resident: Model "llama" (ready); changing spec.replicas (scale) from 0 to 1 of Model "mistral"`,
    );
  });

  test("the autoscaler replica holding the slot's Lease swaps; another replica may not", async () => {
    await scaleAs(autoscaler, "qwen", 1);
    expect(await replicasOf("qwen")).toBe(1);
    await scaleAs(autoscaler, "qwen", 0);
    await coordination().patchNamespacedLease(
      {
        namespace: system,
        name: `snooze-slot-${slot}`,
        body: { spec: { holderIdentity: "snooze-autoscaler-other" } },
      },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
    await expect(scaleAs(autoscaler, "qwen", 1)).rejects.toSatisfy((error: unknown) =>
      errorText(error).includes(
        `does not hold the Lease snooze-slot-${slot} (held by "snooze-autoscaler-other")`,
      ),
    );
    expect(await replicasOf("qwen")).toBe(0);
  });

  test("while a swap is in progress a person waits too; on an empty slot a person may scale the only member", async () => {
    await setStatus("models", "llama", tiers("asleep-1"));
    await setStatus("slots", slot, {
      transition: { from: "llama", to: "mistral", step: "waking", startedAt: "2026-01-01T00:00:00Z" },
    });
    const during = await kubectl(["scale", "-n", ns.name, "deployment/qwen", "--replicas=1"]);
    expect(during.stderr).toContain(
      `denied the request: slot "${slot}" is swapping from "llama" to "mistral" (step waking); changing spec.replicas (scale) from 0 to 1`,
    );
    await custom.patchNamespacedCustomObjectStatus(
      {
        group,
        version,
        namespace: ns.name,
        plural: "slots",
        name: `${slot}`,
        body: [{ op: "remove", path: "/status/transition" }],
      },
      setHeaderOptions("Content-Type", PatchStrategy.JsonPatch),
    );
    const after = await kubectl(["scale", "-n", ns.name, "deployment/qwen", "--replicas=1"]);
    expect(after.code, after.stderr).toBe(0);
    expect(await replicasOf("qwen")).toBe(1);
  });
});

describe("members leave their slot only when not resident", () => {
  test("a resident Model may not be deleted or moved; asleep it may", async () => {
    await createModel("resident", { slot: "gpu-leave" });
    await setStatus("models", "resident", tiers("ready"));
    const deletion = await kubectl(["delete", "-n", ns.name, "models.snooze.dev/resident", "--wait=false"]);
    expect(deletion.stderr).toContain(
      'admission webhook "models.validate.snooze.dev" denied the request: Model "resident" is resident in slot "gpu-leave" (ready) and may not leave the slot while resident: deleting it is refused. ' +
        "Let it sleep first (POST /snooze/v1/models/resident/sleep on the activator, or scale it to 0), then retry.",
    );
    const move = await kubectl([
      "patch",
      "-n",
      ns.name,
      "models.snooze.dev/resident",
      "--type=merge",
      "-p",
      '{"spec":{"slot":"gpu-other"}}',
    ]);
    expect(move.stderr).toContain('changing spec.slot to "gpu-other" is refused');
    await setStatus("models", "resident", tiers("asleep-2"));
    expect(
      (await kubectl(["delete", "-n", ns.name, "models.snooze.dev/resident", "--wait=false"])).code,
    ).toBe(0);
  });

  test("a Model the Slot's status names as resident may not be deleted or moved either", async () => {
    // Found by an outside tester: only the Model's own replicaTiers were looked at.
    await createSlot("gpu-s");
    await createModel("mr", { slot: "gpu-s" });
    await setStatus("slots", "gpu-s", { resident: "mr" });
    const deletion = await kubectl(["delete", "-n", ns.name, "models.snooze.dev/mr", "--wait=false"]);
    expect(deletion.stderr).toContain(
      `Model "mr" is resident in slot "gpu-s" (resident in the Slot's status) and may not leave the slot while resident: deleting it is refused.`,
    );
    const move = await kubectl([
      "patch",
      "-n",
      ns.name,
      "models.snooze.dev/mr",
      "--type=merge",
      "-p",
      '{"spec":{"slot":"gpu-t"}}',
    ]);
    expect(move.stderr).toContain('changing spec.slot to "gpu-t" is refused');
    await setStatus("slots", "gpu-s", { resident: null });
    expect((await kubectl(["delete", "-n", ns.name, "models.snooze.dev/mr", "--wait=false"])).code).toBe(0);
  });

  test("a resident member Deployment may not be deleted until it is scaled to 0", async () => {
    expect((await apply(deploymentYaml("runner", 1, { "snooze.dev/slot": "gpu-runner" }))).code).toBe(0);
    const refused = await kubectl(["delete", "-n", ns.name, "deployment/runner", "--wait=false"]);
    expect(refused.stderr).toMatch(
      /Deployment "runner" is resident in slot "gpu-runner" \((starting|running)\) and may not leave the slot/,
    );
    expect((await kubectl(["scale", "-n", ns.name, "deployment/runner", "--replicas=0"])).code).toBe(0);
    await waitFor(
      async () =>
        (await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=runner" })).items.length === 0
          ? true
          : undefined,
      { what: "the runner's pods gone", timeoutMs: 30_000 },
    );
    expect((await kubectl(["delete", "-n", ns.name, "deployment/runner", "--wait=false"])).code).toBe(0);
  });

  test("deleting a namespace with a resident member is not blocked (the namespace controller is exempt)", async () => {
    await createModel("stuck", { slot: "gpu-0" }, doomed.name);
    await setStatus("models", "stuck", tiers("ready"), doomed.name);
    await core.deleteNamespace({ name: doomed.name });
    await waitFor(
      async () => {
        try {
          await core.readNamespace({ name: doomed.name });
          return undefined;
        } catch (error) {
          return (error as { code?: number }).code === 404 ? true : undefined;
        }
      },
      { what: `namespace ${doomed.name} deleted`, timeoutMs: 60_000, intervalMs: 500 },
    );
  });
});

describe("mutation", () => {
  test("replicas=1 pinning with a warning, and the pod template stamped with the slot", async () => {
    await createSlot("gpu-pin", { device: "1" });
    const result = await apply(deploymentYaml("pinned", 3, { "snooze.dev/slot": "gpu-pin" }));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'Warning: Deployment "pinned" is in slot "gpu-pin": spec.replicas 3 pinned to 1 (a slot runs one replica of one member at a time; take it out of the slot to scale it out)',
    );
    const stored = await apps.readNamespacedDeployment({ namespace: ns.name, name: "pinned" });
    expect(stored.spec?.replicas).toBe(1);
    expect(stored.spec?.template.metadata?.labels).toMatchObject({ "snooze.dev/slot-member": "true" });
    expect(stored.spec?.template.metadata?.annotations).toMatchObject({ "snooze.dev/slot": "gpu-pin" });
    const scaled = await kubectl(["scale", "-n", ns.name, "deployment/pinned", "--replicas=4"]);
    expect(scaled.stderr).toContain(
      'Warning: Deployment "pinned" is in slot "gpu-pin": spec.replicas (scale) 4 pinned to 1',
    );
    expect(await replicasOf("pinned")).toBe(1);
  });

  test("pods of slot members get sleep mode and the slot's device, once", async () => {
    const pods = await waitFor(
      async () => {
        const list = await core.listNamespacedPod({ namespace: ns.name, labelSelector: "app=pinned" });
        return list.items.length > 0 ? list.items : undefined;
      },
      { what: "a pod of the pinned Deployment", timeoutMs: 30_000 },
    );
    const engine = pods[0]!.spec!.containers[0]!;
    expect(engine.args).toEqual(["--model", "pinned", "--enable-sleep-mode"]);
    expect(engine.env).toEqual([
      { name: "VLLM_SERVER_DEV_MODE", value: "1" },
      { name: "NVIDIA_VISIBLE_DEVICES", value: "1" },
    ]);
  });

  test("a pod written by hand: the device the Slot names replaces another, with a warning", async () => {
    const result = await apply(`
apiVersion: v1
kind: Pod
metadata:
  name: by-hand
  labels: {snooze.dev/slot-member: "true"}
  annotations: {snooze.dev/slot: gpu-pin}
spec:
  containers:
    - name: engine
      image: vllm/vllm-openai
      args: ["--model", "m", "--enable-sleep-mode"]
      env: [{name: NVIDIA_VISIBLE_DEVICES, value: all}]
`);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'Warning: container "engine": NVIDIA_VISIBLE_DEVICES "all" replaced by the slot\'s device 1',
    );
    const pod = await core.readNamespacedPod({ namespace: ns.name, name: "by-hand" });
    expect(pod.spec?.containers[0]?.args).toEqual(["--model", "m", "--enable-sleep-mode"]);
    expect(pod.spec?.containers[0]?.env).toEqual([
      { name: "NVIDIA_VISIBLE_DEVICES", value: "1" },
      { name: "VLLM_SERVER_DEV_MODE", value: "1" },
    ]);
  });

  test("a Knative Service in a slot: max-scale pinned to 1, initial-scale to 0 on its revision template", async () => {
    const result = await apply(`
apiVersion: serving.knative.dev/v1
kind: Service
metadata: {name: kpinned, annotations: {snooze.dev/slot: gpu-pin}}
spec:
  template:
    metadata: {annotations: {autoscaling.knative.dev/max-scale: "4"}}
    spec: {containers: [{image: vllm/vllm-openai}]}
`);
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'Warning: Service "kpinned" is in slot "gpu-pin": autoscaling.knative.dev/max-scale "4" pinned to 1',
    );
    const stored = (await custom.getNamespacedCustomObject({
      group: "serving.knative.dev",
      version: "v1",
      namespace: ns.name,
      plural: "services",
      name: "kpinned",
    })) as {
      spec: {
        template: { metadata: { annotations: Record<string, string>; labels: Record<string, string> } };
      };
    };
    expect(stored.spec.template.metadata.annotations).toEqual({
      "autoscaling.knative.dev/max-scale": "1",
      "autoscaling.knative.dev/initial-scale": "0",
      "snooze.dev/slot": "gpu-pin",
    });
    expect(stored.spec.template.metadata.labels).toEqual({ "snooze.dev/slot-member": "true" });
  });

  test("a workload outside any slot is left alone", async () => {
    const result = await apply(deploymentYaml("free", 3, {}, "nginx"));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).not.toContain("Warning");
    const stored = await apps.readNamespacedDeployment({ namespace: ns.name, name: "free" });
    expect(stored.spec?.replicas).toBe(3);
    expect(stored.spec?.template.metadata?.labels).toEqual({ app: "free" });
  });

  test("a model workload outside a slot whose vLLM lacks sleep mode is warned: each sleep would stop it instead", async () => {
    const result = await apply(deploymentYaml("sleepless", 0, { "snooze.dev/model": "sleepless" }));
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'Warning: Deployment "sleepless": container "engine" runs vLLM without --enable-sleep-mode and VLLM_SERVER_DEV_MODE=1',
    );
    // A model that does not sleep needs neither.
    const off = await apply(
      deploymentYaml("sleepless-off", 0, {
        "snooze.dev/model": "sleepless-off",
        "snooze.dev/sleep": "false",
      }),
    );
    expect(off.code, off.stderr).toBe(0);
    expect(off.stderr).not.toContain("Warning");
  });
});

describe("metrics", () => {
  test("requests by webhook and verdict, and how long the decisions took", async () => {
    const certs = secretData(await core.readNamespacedSecret({ namespace: system, name: certSecret }));
    const dispatcher = new Agent({ connect: { ca: certs.bundle.join("") } });
    const text = await (await fetch(`https://127.0.0.1:${port}/metrics`, { dispatcher })).text();
    await dispatcher.close();
    expect(text).toMatch(/snooze_webhook_requests_total\{webhook="validate-scale",verdict="denied"\} [1-9]/);
    expect(text).toMatch(
      /snooze_webhook_requests_total\{webhook="validate-workloads",verdict="denied"\} [1-9]/,
    );
    expect(text).toMatch(/snooze_webhook_requests_total\{webhook="mutate-pods",verdict="patched"\} [1-9]/);
    expect(text).toMatch(
      /snooze_webhook_requests_total\{webhook="mutate-workloads",verdict="patched"\} [1-9]/,
    );
    // Mean time per decision, as the webhook measured it (for the record in the test output).
    const values = (name: string) =>
      new Map(
        [...text.matchAll(new RegExp(`^${name}\\{webhook="([^"]+)"\\} (\\S+)$`, "gm"))].map((m) => [
          m[1]!,
          Number(m[2]),
        ]),
      );
    const sums = values("snooze_webhook_duration_seconds_sum");
    const counts = values("snooze_webhook_duration_seconds_count");
    const means = [...counts].map(
      ([webhook, count]) => `${webhook} ${count}x mean ${((sums.get(webhook)! / count) * 1000).toFixed(2)}ms`,
    );
    console.log(`webhook decisions: ${means.join(", ")}`);
    expect(means.length).toBeGreaterThanOrEqual(5);
  });
});
