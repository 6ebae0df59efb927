import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { CoreV1Api, CustomObjectsApi, RbacAuthorizationV1Api } from "@kubernetes/client-node";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { group, version } from "../../lib/kube/api-group.ts";
import { edgeModelSpec, invalidModels, validModelSpec } from "../fixtures/models.ts";
import { repoRoot } from "./harness/assets.ts";
import { applyManifests, errorText, manifestsUnder, waitForCrds } from "./harness/manifests.ts";
import { createTestNamespace } from "./harness/namespace.ts";
import { suiteCluster } from "./harness/suite.ts";

const run = promisify(execFile);
const cluster = suiteCluster();
const custom = cluster.admin.makeApiClient(CustomObjectsApi);
let namespace: Awaited<ReturnType<typeof createTestNamespace>>;

const model = (name: string, spec: Record<string, unknown>) => ({
  apiVersion: `${group}/${version}`,
  kind: "Model",
  metadata: { name },
  spec,
});
const createModel = (name: string, spec: Record<string, unknown>) =>
  custom.createNamespacedCustomObject({
    group,
    version,
    namespace: namespace.name,
    plural: "models",
    body: model(name, spec),
    fieldValidation: "Strict",
  });

beforeAll(async () => {
  const failures = await applyManifests(cluster.admin, await manifestsUnder(join(repoRoot, "config/crd")), {
    dryRun: false,
  });
  expect(failures).toEqual([]);
  await waitForCrds(cluster.admin, ["models.snooze.dev", "slots.snooze.dev"]);
  namespace = await createTestNamespace(cluster.admin, "snooze-e2e-crds");
});

afterAll(async () => {
  await namespace?.remove();
});

describe("the Model and Slot CRDs in a real apiserver", () => {
  test("accept a valid Model and apply the schema's defaults", async () => {
    const created = (await createModel("qwen", validModelSpec as Record<string, unknown>)) as {
      spec: Record<string, unknown>;
    };
    expect(created.spec).toMatchObject({ port: 8000, minReplicas: 0, maxReplicas: 2, sleepAfter: "5m" });
  });

  test("accept the values at the edge of each range its rules check", async () => {
    await createModel("edge", edgeModelSpec as Record<string, unknown>);
  });

  test.each(invalidModels)(
    "refuse an invalid Model with a clear message: $name",
    async ({ name, spec, apiserver, code }) => {
      const error = await createModel(`bad-${name}`, spec).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error, "the apiserver accepted it").toBeDefined();
      expect((error as { code?: number }).code).toBe(code ?? 422);
      expect(errorText(error)).toMatch(apiserver);
    },
  );

  test("accept a valid Slot and refuse an unknown policy", async () => {
    const slot = (name: string, spec: Record<string, unknown>) =>
      custom.createNamespacedCustomObject({
        group,
        version,
        namespace: namespace.name,
        plural: "slots",
        body: { apiVersion: `${group}/${version}`, kind: "Slot", metadata: { name }, spec },
        fieldValidation: "Strict",
      });
    await slot("gpu-0", { policy: "fifo", minResidency: "30s", device: "0" });
    const error = await slot("gpu-1", { policy: "lottery" }).catch((e: unknown) => e);
    expect(errorText(error)).toMatch(
      /spec\.policy: Unsupported value: "lottery": supported values: "sticky", "fifo", "priority"/,
    );
    // The range of a Slot's durations, by the same rules as a Model's.
    const tooLong = await slot("gpu-2", { maxWait: "1000h", swapCooldown: "600h" }).catch((e: unknown) => e);
    expect(errorText(tooLong)).toMatch(
      /spec\.maxWait: Invalid value: "1000h": is too long: at most 596h31m23\.647s/,
    );
    expect(errorText(tooLong)).toMatch(
      /spec\.swapCooldown: Invalid value: "600h": is too long: at most 596h31m23\.647s/,
    );
  });

  test("the scale subresource reads and writes replicas and selector, as HPA does", async () => {
    await createModel("scaled", {
      workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "scaled" },
      replicas: 1,
      maxReplicas: 4,
    });
    // The autoscaler publishes status: ready + warming, and the selector of the model's pods.
    await custom.patchNamespacedCustomObjectStatus({
      group,
      version,
      namespace: namespace.name,
      plural: "models",
      name: "scaled",
      body: [
        {
          op: "add",
          path: "/status",
          value: {
            replicas: 1,
            readyReplicas: 1,
            warmingReplicas: 0,
            sleepingReplicas: 0,
            selector: "app=scaled",
            phase: "Ready",
          },
        },
      ],
    });

    // A ServiceAccount that may only touch models/scale, like the HPA controller's */scale rights.
    await cluster.admin.makeApiClient(CoreV1Api).createNamespacedServiceAccount({
      namespace: namespace.name,
      body: { metadata: { name: "hpa-like" } },
    });
    const rbac = cluster.admin.makeApiClient(RbacAuthorizationV1Api);
    await rbac.createNamespacedRole({
      namespace: namespace.name,
      body: {
        metadata: { name: "scale-only" },
        rules: [{ apiGroups: [group], resources: ["models/scale"], verbs: ["get", "update", "patch"] }],
      },
    });
    await rbac.createNamespacedRoleBinding({
      namespace: namespace.name,
      body: {
        metadata: { name: "scale-only" },
        roleRef: { apiGroup: "rbac.authorization.k8s.io", kind: "Role", name: "scale-only" },
        subjects: [{ kind: "ServiceAccount", name: "hpa-like", namespace: namespace.name }],
      },
    });
    const hpa = (await cluster.asServiceAccount(namespace.name, "hpa-like")).makeApiClient(CustomObjectsApi);
    const target = { group, version, namespace: namespace.name, plural: "models", name: "scaled" };

    const scale = (await hpa.getNamespacedCustomObjectScale(target)) as {
      kind: string;
      spec: { replicas: number };
      status: { replicas: number; selector: string };
    };
    expect(scale.kind).toBe("Scale");
    expect(scale.spec.replicas).toBe(1);
    expect(scale.status).toEqual({ replicas: 1, selector: "app=scaled" });

    await hpa.replaceNamespacedCustomObjectScale({ ...target, body: { ...scale, spec: { replicas: 3 } } });
    const after = (await custom.getNamespacedCustomObject(target)) as { spec: { replicas: number } };
    expect(after.spec.replicas).toBe(3);
    // The scale-only identity cannot reach the rest of the Model.
    await expect(hpa.getNamespacedCustomObject(target)).rejects.toMatchObject({ code: 403 });
  });

  test("a back-off's retryAt is kept in the status, and a merge patch naming it null takes it out (as the autoscaler writes it)", async () => {
    await createModel("backed-off", {
      workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "backed-off" },
    });
    const env = { ...process.env, KUBECONFIG: cluster.info.kubeconfigPath };
    const patchStatus = (status: object) =>
      run(
        cluster.info.kubectl,
        [
          "patch",
          "model",
          "backed-off",
          "-n",
          namespace.name,
          "--subresource=status",
          "--type=merge",
          "-p",
          JSON.stringify({ status }),
        ],
        { env },
      );
    const status = async () =>
      (
        (await custom.getNamespacedCustomObject({
          group,
          version,
          namespace: namespace.name,
          plural: "models",
          name: "backed-off",
        })) as {
          status?: Record<string, unknown>;
        }
      ).status;
    await patchStatus({ retryAt: "2030-01-01T00:00:00.250Z", phase: "Failed" });
    expect(await status()).toMatchObject({ retryAt: "2030-01-01T00:00:00.250Z", phase: "Failed" });
    await patchStatus({ retryAt: null, phase: "Cold" });
    const after = await status();
    expect(after).toMatchObject({ phase: "Cold" });
    expect(after).not.toHaveProperty("retryAt");
  });

  test("kubectl shows the printer columns and explains every field", async () => {
    const env = { ...process.env, KUBECONFIG: cluster.info.kubeconfigPath };
    const { stdout: table } = await run(cluster.info.kubectl, ["get", "models", "-n", namespace.name], {
      env,
    });
    expect(table.split("\n")[0]).toMatch(/^NAME\s+READY\s+WARMING\s+SLEEPING\s+PHASE\s+AGE$/);
    expect(table).toMatch(/scaled\s+1\s+0\s+0\s+Ready/);

    const { stdout: explained } = await run(cluster.info.kubectl, ["explain", "model.spec.sleepAfter"], {
      env,
    });
    expect(explained).toContain("Idle time after which a ready replica is drained");
    expect(explained).toContain("Default: 5m");
    const { stdout: status } = await run(cluster.info.kubectl, ["explain", "model.status", "--recursive"], {
      env,
    });
    for (const field of [
      "readyReplicas",
      "warmingReplicas",
      "sleepingReplicas",
      "replicaTiers",
      "lastWakeDuration",
      "retryAt",
    ]) {
      expect(status).toContain(field);
    }
  });
});
