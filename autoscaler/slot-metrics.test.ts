import { Registry } from "prom-client";
import { expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import { parseConfig } from "../lib/settings/index.ts";
import { Harness } from "../test/support/autoscaler-harness.ts";
import { FakePlatform } from "../test/support/fake-platform.ts";
import { ManualClock } from "../test/support/manual-clock.ts";
import { Autoscaler } from "./autoscaler.ts";
import { localActivator } from "./local/control-plane.ts";

/** The series of one metric family: `{labels} value`, sorted. */
async function series(registry: Registry, name: string): Promise<string[]> {
  const metric = registry.getSingleMetric(name);
  if (!metric) return [];
  const { values } = await metric.get();
  return values.map(({ labels, value }) => `${JSON.stringify(labels)} ${value}`).sort();
}

const members = (ids: string[]) => `
slots:
  gpu: { minResidency: 0s, swapCooldown: 0s }
models:
${ids.map((id) => `  ${id}: { slot: gpu, command: [engine, "\${PORT}"] }`).join("\n")}
`;

test("slots of one name in two namespaces are two series in every slot metric, named as snooze_slot_gpu_seconds_total names them", async () => {
  // Found by an outside tester: snooze_slot_resident, _swaps_total and _swap_duration_seconds said
  // `gpu` for both (their series merged), while snooze_slot_gpu_seconds_total said `team-a/gpu`.
  const config = parseConfig(members(["a", "b", "c"]), "test.yaml");
  const clock = new ManualClock();
  const keys = ["team-a/a", "team-a/b", "team-b/c"];
  const platform = new FakePlatform(keys, { clock, autoUp: true });
  const registry = new Registry();
  const autoscaler = new Autoscaler({
    platform,
    clock,
    log: silentLogger,
    registry,
    hostMemoryBudget: config.hostMemoryBudget,
    drainGraceMs: 0,
    activatorExpiryMs: Number.POSITIVE_INFINITY,
    selfHealIntervalMs: Number.POSITIVE_INFINITY,
  });
  const slotConfig = config.slots.get("gpu")!;
  for (const key of keys) {
    const namespace = key.split("/")[0]!;
    autoscaler.addModel(
      { key, config: config.models.get(key.split("/")[1]!)!, minReplicas: 0, maxReplicas: 1 },
      { slot: { key: `${namespace}/gpu`, config: slotConfig }, holding: () => true },
    );
  }
  for (const slot of autoscaler.slots.values()) slot.lead();
  for (const controller of autoscaler.controllers) controller.lead();

  const serve = async (id: string) => {
    autoscaler.demand(localActivator, id);
    await clock.settle();
    autoscaler.stats(localActivator, id, { inFlight: 0, held: 0 });
    await clock.advanceAndSettle(1_000);
  };
  await serve("a");
  await serve("c");
  await serve("b");
  await clock.advanceAndSettle(1_000);

  expect(await series(registry, "snooze_slot_resident")).toEqual([
    '{"slot":"team-a/gpu","model":"team-a/a"} 0',
    '{"slot":"team-a/gpu","model":"team-a/b"} 1',
    '{"slot":"team-b/gpu","model":"team-b/c"} 1',
  ]);
  expect(await series(registry, "snooze_slot_swaps_total")).toEqual([
    '{"slot":"team-a/gpu","from":"team-a/a","to":"team-a/b"} 1',
  ]);
  const slots = (await series(registry, "snooze_slot_swap_duration_seconds")).map(
    (line) => JSON.parse(line.slice(0, line.lastIndexOf(" "))).slot,
  );
  expect(new Set(slots)).toEqual(new Set(["team-a/gpu"]));
  const gpu = (await series(registry, "snooze_slot_gpu_seconds_total")).map(
    (line) => JSON.parse(line.slice(0, line.lastIndexOf(" "))).slot,
  );
  expect(new Set(gpu)).toEqual(new Set(["team-a/gpu", "team-b/gpu"]));
});

test("a member that leaves its slot, and a slot no longer led, leave no snooze_slot_resident series behind", async () => {
  // Found by an outside tester: a reload that took a model out of its slot (or the slot out of the
  // settings) left `snooze_slot_resident{slot,model}` for good.
  const h = new Harness(members(["a", "b"]), { autoUp: true });
  await h.serveCold("a");
  await h.advance(1_000);
  expect(await series(h.registry, "snooze_slot_resident")).toEqual([
    '{"slot":"gpu","model":"a"} 1',
    '{"slot":"gpu","model":"b"} 0',
  ]);
  h.autoscaler.removeModel("b");
  await h.settle();
  expect(await series(h.registry, "snooze_slot_resident")).toEqual(['{"slot":"gpu","model":"a"} 1']);
  h.autoscaler.slots.get("gpu")!.standDown();
  expect(await series(h.registry, "snooze_slot_resident")).toEqual([]);
  h.autoscaler.slots.get("gpu")!.lead();
  await h.settle();
  expect(await series(h.registry, "snooze_slot_resident")).toEqual(['{"slot":"gpu","model":"a"} 1']);
  h.autoscaler.removeModel("a");
  await h.settle();
  expect(await series(h.registry, "snooze_slot_resident")).toEqual([]);
});
