import { expect, test } from "vitest";
import { type KubeClient, KubeError } from "../../lib/kube/client.ts";
import { modelStatus as modelStatusSchema } from "../../lib/kube/model-resource.ts";
import { silentLogger } from "../../lib/log.ts";
import { InvalidModels, invalidModelStatus } from "./invalid-models.ts";

const now = Date.parse("2026-03-01T10:00:00Z");
const model = (generation: number, status?: Record<string, unknown>) =>
  ({
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Model",
    metadata: { name: "qwen", namespace: "ml", generation, resourceVersion: `${generation}0` },
    spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" }, startTimeout: "0" },
    ...(status ? { status } : {}),
  }) as never;
const error = "startTimeout: must be longer than 0: a start that hangs must fail, so held requests hear why";

test("a spec Snooze cannot use: phase Failed, Ready False for InvalidSpec naming the field, for this generation", () => {
  const status = invalidModelStatus(model(4), error, now);
  expect(status).toEqual({
    observedGeneration: 4,
    phase: "Failed",
    conditions: [
      {
        type: "Ready",
        status: "False",
        reason: "InvalidSpec",
        message: `Snooze ignores this Model until its spec is fixed: ${error}`,
        lastTransitionTime: "2026-03-01T10:00:00Z",
        observedGeneration: 4,
      },
    ],
  });
  expect(modelStatusSchema.safeParse(status).success).toBe(true);
  // Not ready before either: the transition time stays.
  const before = {
    conditions: [{ type: "Ready", status: "False", lastTransitionTime: "2026-02-01T00:00:00Z" }],
  };
  expect(invalidModelStatus(model(5, before), error, now).conditions?.[0]?.lastTransitionTime).toBe(
    "2026-02-01T00:00:00Z",
  );
});

/** A client whose status patches are recorded; the first `conflicts` of them answer 409. */
function recordingClient(conflicts = 0, fresh = model(4)) {
  const patches: { path: string; body: any }[] = [];
  const client = {
    patch: async (path: string, body: unknown) => {
      patches.push({ path, body });
      if (conflicts-- > 0) throw new KubeError(409, "Conflict", "conflict");
      return {};
    },
    get: async () => fresh,
  } as unknown as KubeClient;
  return { client, patches };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 10));

test("written once per spec, only while leading; logged once per spec, not at every sync", async () => {
  const { client, patches } = recordingClient();
  const lines: string[] = [];
  const log = { ...silentLogger, warn: (message: string) => lines.push(message) } as typeof silentLogger;
  let leading = false;
  const reporter = new InvalidModels({ client, log, leading: () => leading });
  reporter.report([{ model: model(4), error }]);
  await settle();
  expect(patches).toEqual([]);
  leading = true;
  for (let i = 0; i < 5; i++) reporter.report([{ model: model(4), error }]);
  await settle();
  expect(patches.map((p) => p.path)).toEqual(["/apis/snooze.dev/v1alpha1/namespaces/ml/models/qwen/status"]);
  expect(patches[0]?.body).toMatchObject({
    metadata: { resourceVersion: "40" },
    status: { phase: "Failed", conditions: [{ reason: "InvalidSpec" }] },
  });
  expect(lines).toEqual(["a Model's spec cannot be used; ignored until it is fixed"]);
  // A new spec that is still wrong: said and written again.
  reporter.report([{ model: model(5), error }]);
  await settle();
  expect(patches).toHaveLength(2);
  expect(lines).toHaveLength(2);
  // A new leader writes it again.
  reporter.reset();
  reporter.report([{ model: model(5), error }]);
  await settle();
  expect(patches).toHaveLength(3);
});

test("a conflict reads the Model again and writes on its version; one whose spec changed meanwhile is left to the next sync", async () => {
  const first = recordingClient(1, {
    ...(model(4) as object),
    metadata: { ...(model(4) as any).metadata, resourceVersion: "41" },
  } as never);
  new InvalidModels({ client: first.client, log: silentLogger, leading: () => true }).report([
    { model: model(4), error },
  ]);
  await settle();
  expect(first.patches.map((p) => p.body.metadata.resourceVersion)).toEqual(["40", "41"]);
  const changed = recordingClient(1, model(5));
  new InvalidModels({ client: changed.client, log: silentLogger, leading: () => true }).report([
    { model: model(4), error },
  ]);
  await settle();
  expect(changed.patches).toHaveLength(1);
});
