import { spawn } from "node:child_process";
import { join } from "node:path";
import { CoreV1Api, PatchStrategy, setHeaderOptions } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { KubeClient } from "../../lib/kube/client.ts";
import {
  findKnative,
  type Knative,
  knativeMissing,
  knativeService,
  servingApi,
  startKnative,
} from "./components/knative.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import type { ManagedProcess } from "./harness/process.ts";
import { suiteCluster } from "./harness/suite.ts";
import { waitFor } from "./harness/wait.ts";
import {
  installSnoozeIdentity,
  registerWebhooks,
  startWebhooksProcess,
  waitForReadyLog,
  webhooksKubeconfig,
} from "./webhooks-fixture.ts";

/**
 * Snooze's webhooks beside a real Knative Serving (its CRDs, webhook and controller): a
 * Configuration applied directly, without a Service, carries a revision template as a Service does,
 * and its `snooze.dev/*` annotations are checked by the same validation, in the same words (found by
 * an outside tester: the webhooks were registered for Services only, so a direct Configuration made
 * revisions whose settings no webhook had seen). Knative's own Configuration writes, for a Service,
 * pass through the same rule.
 */
const folder = findKnative();
const cluster = suiteCluster();
let knative: Knative | undefined;
let webhooks: ManagedProcess | undefined;
let removeConfigurations: () => Promise<void> = async () => {};
let ns: Awaited<ReturnType<typeof createTestNamespace>> | undefined;
let client: KubeClient;

function kubectl(args: string[], input: string) {
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
    child.stdin.end(input);
  });
}

const apply = (object: unknown, dryRun = false) =>
  kubectl(
    ["apply", "-n", ns!.name, ...(dryRun ? ["--dry-run=server"] : []), "-f", "-"],
    JSON.stringify(object),
  );

/** A Configuration of its own: a Knative Service's revision template, without the Service. */
const configuration = (name: string, annotations: Record<string, string>) => {
  const service = knativeService(name, { kubelet: cluster.info.kubelet, annotations });
  return {
    apiVersion: "serving.knative.dev/v1",
    kind: "Configuration",
    metadata: { name },
    spec: service.spec,
  };
};
const bad = { "autoscaling.knative.dev/class": "snooze.dev", "snooze.dev/sleep-after": "soon" };
const problem =
  'spec.template.metadata.annotations["snooze.dev/sleep-after"]: "soon": expected a duration like "250ms", "30s", "5m", "1h30m", "0" or "never"';

beforeAll(async () => {
  if (!folder) throw new Error(knativeMissing());
  // A slot member's revision starts with no pod (the webhooks pin initial-scale to 0).
  knative = await startKnative(cluster, folder, {
    config: { "config-autoscaler": { "allow-zero-initial-scale": "true" } },
  });
  await installSnoozeIdentity(cluster, { realKnative: true });
  client = await KubeClient.fromKubeConfig(cluster.admin);
  ns = await createTestNamespace(cluster.admin, "snooze-e2e-kwebhooks");
  await cluster.admin
    .makeApiClient(CoreV1Api)
    .patchNamespace(
      { name: ns.name, body: { metadata: { labels: { "snooze.dev/webhooks": "enabled" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  const port = await freePort();
  removeConfigurations = await registerWebhooks(cluster.admin, port, [ns.name]);
  webhooks = startWebhooksProcess({
    kubeconfigPath: await webhooksKubeconfig(cluster, "webhooks-knative.kubeconfig"),
    port,
    logPath: join(cluster.info.dir, "snooze-webhooks-knative.log"),
  });
  await waitForReadyLog(webhooks);
  // Until the apiserver trusts the CA bundle and reaches the webhooks (a Deployment is always theirs).
  await waitFor(
    async () => {
      const result = await kubectl(
        ["apply", "--dry-run=server", "-n", ns!.name, "-f", "-"],
        JSON.stringify({
          apiVersion: "apps/v1",
          kind: "Deployment",
          metadata: { name: "probe", annotations: { "snooze.dev/sleep-after": "soon" } },
          spec: {
            selector: { matchLabels: { app: "probe" } },
            template: {
              metadata: { labels: { app: "probe" } },
              spec: { containers: [{ name: "e", image: "x" }] },
            },
          },
        }),
      );
      return /has invalid snooze\.dev annotations/.test(result.stderr) ? true : undefined;
    },
    {
      what: "the apiserver calling the webhooks",
      timeoutMs: 30_000,
      intervalMs: 250,
      detail: () => webhooks!.tail(),
    },
  );
}, 240_000);

afterAll(async () => {
  // Configurations first: with failurePolicy Fail they would refuse writes once the process is gone.
  await removeConfigurations();
  await webhooks?.stop();
  if (ns) {
    await client?.delete(`${servingApi}/namespaces/${ns.name}/services/kservice`).catch(() => {});
    for (const name of ["kgood", "kslot"])
      await client?.delete(`${servingApi}/namespaces/${ns.name}/configurations/${name}`).catch(() => {});
  }
  await ns?.remove();
  await knative?.stop();
  await client?.close();
}, 60_000);

describe("a Knative Configuration applied directly", () => {
  test("invalid revision template settings: refused with the words a Service gets", async () => {
    const direct = await apply(configuration("kconf", bad));
    expect(direct.code).not.toBe(0);
    expect(direct.stderr).toContain(
      `admission webhook "workloads.validate.snooze.dev" denied the request: Configuration "kconf" has invalid snooze.dev annotations: ${problem}`,
    );
    const viaService = await apply(
      knativeService("kconf", { kubelet: cluster.info.kubelet, annotations: bad }),
      true,
    );
    expect(viaService.stderr).toContain(`Service "kconf" has invalid snooze.dev annotations: ${problem}`);
    await expect(client.get(`${servingApi}/namespaces/${ns!.name}/configurations/kconf`)).rejects.toThrow();
  });

  test("valid settings: admitted, and Knative makes its Revision", async () => {
    const result = await apply(
      configuration("kgood", {
        "autoscaling.knative.dev/class": "snooze.dev",
        "snooze.dev/sleep-after": "5m",
      }),
    );
    expect(result.code, result.stderr).toBe(0);
    await waitFor(
      async () => {
        const list = await client.list<{ metadata: { name: string } }>(
          `${servingApi}/namespaces/${ns!.name}/revisions`,
          {
            labelSelector: "serving.knative.dev/configuration=kgood",
          },
        );
        return list.items.length > 0 ? true : undefined;
      },
      { what: "the Revision of kgood", timeoutMs: 60_000, intervalMs: 250, detail: () => knative!.logs(20) },
    );
  });

  test("in a slot: pinned as a Service is, one pod at most and none to begin with", async () => {
    const result = await apply(
      configuration("kslot", {
        "autoscaling.knative.dev/class": "snooze.dev",
        "autoscaling.knative.dev/max-scale": "3",
        "snooze.dev/slot": "gpu-kconf",
      }),
    );
    expect(result.code, result.stderr).toBe(0);
    expect(result.stderr).toContain(
      'Configuration "kslot" is in slot "gpu-kconf": autoscaling.knative.dev/max-scale "3" pinned to 1',
    );
    const stored = await client.get<{
      spec: { template: { metadata: { annotations: Record<string, string> } } };
    }>(`${servingApi}/namespaces/${ns!.name}/configurations/kslot`);
    expect(stored.spec.template.metadata.annotations).toMatchObject({
      "autoscaling.knative.dev/max-scale": "1",
      "autoscaling.knative.dev/initial-scale": "0",
      "snooze.dev/slot": "gpu-kconf",
    });
  });

  test("a Service's own Configuration, written by Knative's controller, passes the same rule", async () => {
    const result = await apply(
      knativeService("kservice", {
        kubelet: cluster.info.kubelet,
        annotations: { "autoscaling.knative.dev/class": "snooze.dev", "snooze.dev/sleep-after": "5m" },
      }),
    );
    expect(result.code, result.stderr).toBe(0);
    await waitFor(
      async () =>
        (await client
          .get(`${servingApi}/namespaces/${ns!.name}/configurations/kservice`)
          .catch(() => undefined)) ?? undefined,
      {
        what: "the Configuration Knative makes for kservice",
        timeoutMs: 60_000,
        intervalMs: 250,
        detail: () => `${knative!.logs(20)}\nwebhooks:\n${webhooks!.tail()}`,
      },
    );
  });
});

describe("a Knative Revision created directly (no Configuration)", () => {
  /** A Revision of its own: a Knative Service's revision template as the Revision itself. */
  const revision = (name: string, annotations: Record<string, string>) => {
    const template = knativeService(name, { kubelet: cluster.info.kubelet, annotations }).spec.template;
    return {
      apiVersion: "serving.knative.dev/v1",
      kind: "Revision",
      metadata: { name, annotations: template.metadata.annotations, labels: template.metadata.labels },
      spec: template.spec,
    };
  };

  test("invalid settings in its own annotations: refused with the words a Deployment gets", async () => {
    // Before: no webhook was registered for Revisions, so such a Revision's settings were first
    // read by the autoscaler from its PodAutoscaler.
    const result = await apply(revision("krev-bad", bad), true);
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain(
      'admission webhook "revisions.validate.snooze.dev" denied the request: Revision "krev-bad" has invalid snooze.dev annotations: metadata.annotations["snooze.dev/sleep-after"]: "soon": expected a duration',
    );
  });

  test("valid settings: admitted by both Knative's webhook and Snooze's", async () => {
    const result = await apply(
      revision("krev-good", {
        "autoscaling.knative.dev/class": "snooze.dev",
        "snooze.dev/sleep-after": "5m",
      }),
      true,
    );
    expect(result.code, result.stderr).toBe(0);
    // Knative's own webhook may warn (its security defaults); Snooze has nothing to say.
    expect(result.stderr).not.toContain("snooze.dev");
  });
});
