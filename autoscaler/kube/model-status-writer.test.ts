import { expect, test } from "vitest";
import { modelFromResource } from "../../lib/kube/model-config.ts";
import { silentLogger } from "../../lib/log.ts";
import { ManualClock } from "../../test/support/manual-clock.ts";
import { refusingClient } from "../../test/support/refusing-kube-client.ts";
import type { ModelController } from "../model-controller.ts";
import { ModelStatusWriter } from "./model-status-writer.ts";

const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
};

test("a Model status write the API server refuses (429, 500) is made again with back-off while it leads", async () => {
  // Before: refused once, it waited for the Model's next change: a Model that then sat still would
  // keep saying what it no longer was, to the HPA, KEDA and every activator.
  const clock = new ManualClock();
  const refuse = [429, 500];
  const { client, patches } = refusingClient(refuse);
  const resource = {
    apiVersion: "snooze.dev/v1alpha1" as const,
    kind: "Model" as const,
    metadata: { name: "qwen", namespace: "ml", resourceVersion: "3" },
    spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" } },
  };
  const model = modelFromResource(resource as never);
  if ("error" in model) throw new Error(model.error);
  let holding = true;
  const writer = new ModelStatusWriter({
    client,
    log: silentLogger,
    clock,
    model: () => model,
    controller: () =>
      ({
        observation: () => ({ replicas: [], pendingPods: 1, now: clock.now() }),
      }) as unknown as ModelController,
    resource: () => resource as never,
    selector: () => "app=qwen",
    holding: () => holding,
  });
  writer.schedule();
  await settle();
  expect(patches).toHaveLength(0);
  await clock.advanceAndSettle(1_000);
  await settle();
  expect(patches).toHaveLength(0); // the 500: again in 2 s
  await clock.advanceAndSettle(2_000);
  await settle();
  expect(patches).toEqual([
    expect.objectContaining({ status: expect.objectContaining({ phase: "Starting" }) }),
  ]);

  // No longer leading: a refused write is not made again.
  refuse.push(503);
  writer.reset();
  writer.schedule();
  await settle();
  holding = false;
  await clock.advanceAndSettle(60_000);
  await settle();
  expect(patches).toHaveLength(1);
});
