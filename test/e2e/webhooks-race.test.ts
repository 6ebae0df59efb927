import { spawn } from "node:child_process";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import {
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  PatchStrategy,
  setHeaderOptions,
} from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { freePort } from "../../lib/free-port.ts";
import { claimLeaseName } from "../../webhooks/slot-claims.ts";
import { errorText } from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import type { ManagedProcess } from "./harness/process.ts";
import { suiteCluster } from "./harness/suite.ts";
import { waitFor } from "./harness/wait.ts";
import {
  claimNamespace,
  installSnoozeIdentity,
  registerWebhooks,
  startWebhooksProcess,
  waitForReadyLog,
  webhooksKubeconfig,
} from "./webhooks-fixture.ts";

/**
 * Two writes at once into one empty slot, as an outside tester raced them with kubectl against
 * `snooze webhooks`: two Deployments created at once (repro A), or two scaled from 0 to 1 at once
 * (repro B). The residency rule reads the cluster fresh, but the apiserver stores an allowed object
 * only after the webhooks answered, so without the slot's admission claim both got through in a
 * third to a half of the trials. Two webhook replicas share the port, as the two of
 * config/webhooks/deployment.yaml share the Service. Each trial must leave exactly one resident.
 */
const cluster = suiteCluster();
const trials = 8;
let ns: Awaited<ReturnType<typeof createTestNamespace>>;
let removeConfigurations: () => Promise<void> = async () => {};
const replicas: ManagedProcess[] = [];
let apps: AppsV1Api;

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

function kubectl(args: string[], input?: string): Promise<Run> {
  return new Promise((resolve, reject) => {
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

const deploymentYaml = (name: string, slot: string, count: number) => `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ${name}
  annotations: {"snooze.dev/slot": "${slot}"}
spec:
  replicas: ${count}
  selector: {matchLabels: {app: ${name}}}
  template:
    metadata: {labels: {app: ${name}}}
    spec:
      containers: [{name: engine, image: "vllm/vllm-openai:v0.11.0", args: ["--model", "${name}"]}]
`;

const create = (name: string, slot: string, count: number) =>
  kubectl(["create", "-n", ns.name, "-f", "-"], deploymentYaml(name, slot, count));
const scale = (name: string, ...extra: string[]) =>
  kubectl(["scale", "-n", ns.name, `deployment/${name}`, "--replicas=1", ...extra]);

/** The same writes as `kubectl create` and `kubectl scale`, sent at once from this process. */
const createApi = (name: string, slot: string, count: number) =>
  apps.createNamespacedDeployment({
    namespace: ns.name,
    body: {
      metadata: { name, annotations: { "snooze.dev/slot": slot } },
      spec: {
        replicas: count,
        selector: { matchLabels: { app: name } },
        template: {
          metadata: { labels: { app: name } },
          spec: { containers: [{ name: "engine", image: "vllm/vllm-openai:v0.11.0" }] },
        },
      },
    },
  });
const scaleApi = (name: string) =>
  apps.patchNamespacedDeploymentScale(
    { namespace: ns.name, name, body: { spec: { replicas: 1 } } },
    setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
  );

interface Trial {
  i: number;
  writes: PromiseSettledResult<unknown>[];
  counts: (number | undefined)[];
}

/** Every trial: one member at replicas 1, and the other write refused by the residency rule. */
function expectOneResidentEach(trials: Trial[]) {
  const told = trials.map(
    (t) =>
      `trial ${t.i}: ${t.writes.map((w) => (w.status === "fulfilled" ? "allowed" : "refused"))}, replicas ${t.counts}`,
  );
  for (const t of trials) {
    expect(
      t.counts.filter((c) => (c ?? 0) >= 1),
      told.join("\n"),
    ).toHaveLength(1);
    const refused = t.writes.find((w) => w.status === "rejected");
    expect(errorText(refused?.reason), told.join("\n")).toMatch(refusal);
  }
}

/** spec.replicas of each name; undefined for one that was never created. */
async function replicasOf(names: string[]): Promise<(number | undefined)[]> {
  const list = await apps.listNamespacedDeployment({ namespace: ns.name });
  return names.map((n) => list.items.find((d) => d.metadata?.name === n)?.spec?.replicas);
}

const refusal =
  /denied the request: slot "[a-z]*race\d*" (is claimed: Deployment "[a-z0-9]+" was admitted as its resident|already has a resident: Deployment "[a-z0-9]+")/;

beforeAll(async () => {
  await installSnoozeIdentity(cluster);
  apps = cluster.admin.makeApiClient(AppsV1Api);
  ns = await createTestNamespace(cluster.admin, "snooze-e2e-webhooks-race");
  await cluster.admin
    .makeApiClient(CoreV1Api)
    .patchNamespace(
      { name: ns.name, body: { metadata: { labels: { "snooze.dev/webhooks": "enabled" } } } },
      setHeaderOptions("Content-Type", PatchStrategy.MergePatch),
    );
  const port = await freePort();
  removeConfigurations = await registerWebhooks(cluster.admin, port, [ns.name]);
  const kubeconfigPath = await webhooksKubeconfig(cluster, "webhooks-race.kubeconfig");
  for (const name of ["a", "b"]) {
    replicas.push(
      startWebhooksProcess({
        kubeconfigPath,
        port,
        logPath: join(cluster.info.dir, `snooze-webhooks-race-${name}.log`),
      }),
    );
  }
  await Promise.all(replicas.map((r) => waitForReadyLog(r)));
  await waitFor(
    async () => {
      const probe = await kubectl(
        ["create", "--dry-run=server", "-n", ns.name, "-f", "-"],
        deploymentYaml("probe", "probe", 0).replace(
          '"snooze.dev/slot"',
          '"snooze.dev/sleep-after": "soon", "snooze.dev/slot"',
        ),
      );
      return /has invalid snooze\.dev annotations/.test(probe.stderr) ? true : undefined;
    },
    { what: "the apiserver calling the webhooks", timeoutMs: 30_000, intervalMs: 250 },
  );
});

afterAll(async () => {
  await removeConfigurations();
  await Promise.all(replicas.map((r) => r.stop()));
  await ns?.remove();
});

describe("two writes at once into one empty slot leave one resident", () => {
  test(`repro A: two Deployments created at once with replicas 1, ${trials} trials at once`, async () => {
    const outcomes = await Promise.all(
      Array.from({ length: trials }, async (_, i) => {
        const slot = `race${i}`;
        const writes = await Promise.allSettled([createApi(`a${i}`, slot, 1), createApi(`b${i}`, slot, 1)]);
        return { i, writes, counts: await replicasOf([`a${i}`, `b${i}`]) };
      }),
    );
    expectOneResidentEach(outcomes);
  });

  test(`repro B: two Deployments at 0 scaled to 1 at once, ${trials} trials at once; after the claim's window the fresh read refuses`, async () => {
    await Promise.all(
      Array.from({ length: trials }, (_, i) =>
        Promise.all([createApi(`sa${i}`, `srace${i}`, 0), createApi(`sb${i}`, `srace${i}`, 0)]),
      ),
    );
    const outcomes = await Promise.all(
      Array.from({ length: trials }, async (_, i) => {
        const writes = await Promise.allSettled([scaleApi(`sa${i}`), scaleApi(`sb${i}`)]);
        return { i, writes, counts: await replicasOf([`sa${i}`, `sb${i}`]) };
      }),
    );
    expectOneResidentEach(outcomes);
    // Once the claim has expired the admitted Deployment is stored: the residency rule refuses the
    // loser from the cluster itself (kubectl, as the tester wrote it).
    const [a] = await replicasOf(["sa0"]);
    const loser = a === 1 ? "sb0" : "sa0";
    await sleep(15_500);
    const late = await scale(loser);
    expect(late.stderr).toMatch(
      /denied the request: slot "srace0" already has a resident: Deployment "s[ab]0"/,
    );
  });

  test("with kubectl, as the tester raced it: one of two creates and one of two scales", async () => {
    const creates = await Promise.all([create("ka", "krace", 1), create("kb", "krace", 1)]);
    expect(creates.filter((r) => r.code === 0)).toHaveLength(1);
    expect(creates.find((r) => r.code !== 0)?.stderr).toMatch(refusal);
    for (const name of ["ksa", "ksb"]) expect((await create(name, "ksrace", 0)).code).toBe(0);
    const scales = await Promise.all([scale("ksa"), scale("ksb")]);
    expect(scales.filter((r) => r.code === 0)).toHaveLength(1);
    expect(scales.find((r) => r.code !== 0)?.stderr).toMatch(refusal);
    expect((await replicasOf(["ka", "kb", "ksa", "ksb"])).filter((c) => (c ?? 0) >= 1)).toHaveLength(2);
  });

  test("a member scaled back to 0 gives its claim back: the next member is admitted at once", async () => {
    for (const name of ["rel-a", "rel-b"]) expect((await create(name, "rel-slot", 0)).code).toBe(0);
    const up = await scale("rel-a");
    expect(up.code, up.stderr).toBe(0);
    const down = await kubectl(["scale", "-n", ns.name, "deployment/rel-a", "--replicas=0"]);
    expect(down.code, down.stderr).toBe(0);
    // Before, this was refused for the rest of the claim's window ("is claimed ... Retry in 14.9s").
    const next = await scale("rel-b");
    expect(next.code, next.stderr).toBe(0);
    const claim = await cluster.admin
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: claimNamespace, name: claimLeaseName(ns.name, "rel-slot") });
    expect(claim.spec?.holderIdentity).toBe("Deployment/rel-b");
    // The claim's protection stands: rel-a back up now is refused (by rel-b's claim or the cluster).
    const again = await scale("rel-a");
    expect(again.stderr).toMatch(/denied the request: slot "rel-slot" (is claimed|already has a resident)/);
  });

  test("a dry run is judged but takes no claim", async () => {
    expect((await create("dry", "dry-slot", 0)).code).toBe(0);
    const dry = await scale("dry", "--dry-run=server");
    expect(dry.code, dry.stderr).toBe(0);
    await expect(
      cluster.admin
        .makeApiClient(CoordinationV1Api)
        .readNamespacedLease({ namespace: claimNamespace, name: claimLeaseName(ns.name, "dry-slot") }),
    ).rejects.toMatchObject({ code: 404 });
    const real = await scale("dry");
    expect(real.code, real.stderr).toBe(0);
    const claim = await cluster.admin
      .makeApiClient(CoordinationV1Api)
      .readNamespacedLease({ namespace: claimNamespace, name: claimLeaseName(ns.name, "dry-slot") });
    expect(claim.spec?.holderIdentity).toBe("Deployment/dry");
  });
});
