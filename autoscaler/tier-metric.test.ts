import { Registry } from "prom-client";
import { expect, test } from "vitest";
import { silentLogger } from "../lib/log.ts";
import type { Tier } from "../lib/replica-event.ts";
import { parseConfig } from "../lib/settings/index.ts";
import { Harness } from "../test/support/autoscaler-harness.ts";
import { FakePlatform } from "../test/support/fake-platform.ts";
import { ManualClock } from "../test/support/manual-clock.ts";
import { Autoscaler } from "./autoscaler.ts";

/** The tier `snooze_replica_tier` gives `model` (its one series at 1), or undefined without series. */
async function metricTier(h: Harness, model: string): Promise<Tier | undefined> {
  const { values } = await h.registry.getSingleMetric("snooze_replica_tier")!.get();
  const mine = values.filter((v) => v.labels.model === model);
  const on = mine.filter((v) => v.value === 1);
  if (mine.length === 0) return undefined;
  expect(on).toHaveLength(1);
  return on[0]!.labels.tier as Tier;
}

/** The gauge says what the control plane's summary says (the admin API's, the Model status's). */
async function agrees(h: Harness, model: string, tier?: Tier): Promise<void> {
  const said = h.controller(model).state().tier;
  if (tier !== undefined) expect(said).toBe(tier);
  expect(await metricTier(h, model)).toBe(said);
}

const yaml = `
models:
  m: { command: [engine, "\${PORT}"], sleepAfter: 10s, deepSleepAfter: 1m, zeroAfter: 10m }
`;

test("a start waiting for its replica to appear is `starting` in snooze_replica_tier, as the control plane says", async () => {
  // Before: `cold` until the replica appeared (a pod not created yet; locally an engine waiting for
  // its fixed port), while the admin summary and the Model's status said `starting`.
  const h = new Harness(yaml, { createLater: true });
  await agrees(h, "m", "cold");
  h.demand("m");
  await h.settle();
  await agrees(h, "m", "starting");
  h.platform.createPending("m");
  await h.settle();
  await agrees(h, "m", "starting");
  h.platform.bringUp(h.platform.ids("m")[0]!);
  await h.settle();
  await agrees(h, "m", "ready");
});

test("snooze_replica_tier follows the ladder as the control plane does: start, sleep, deeper sleep, wake, crash, stop", async () => {
  const h = new Harness(yaml);
  const id = await h.serveCold("m");
  await agrees(h, "m", "ready");
  await h.advance(11_000);
  await agrees(h, "m", "asleep-1");
  await h.advance(61_000);
  await agrees(h, "m", "asleep-2");
  const wake = h.platform.engineOf(id).hold("wake");
  h.demand("m");
  await h.settle();
  await agrees(h, "m", "waking");
  wake.release();
  await h.settle();
  await agrees(h, "m", "ready");
  await h.request("m");
  h.platform.crash(id, "exit code 1");
  await agrees(h, "m");
  await h.settle();
  await agrees(h, "m", "cold");
  await h.serveCold("m");
  await agrees(h, "m", "ready");
  expect(await h.controller("m").stopNow()).toBe("done");
  await agrees(h, "m", "cold");
});

test("snooze_replica_tier says nothing of a model this process stopped leading, nor of one removed", async () => {
  const h = new Harness(yaml);
  await h.serveCold("m");
  h.controller("m").standDown();
  expect(await metricTier(h, "m")).toBeUndefined();
  h.controller("m").lead();
  await h.settle();
  await agrees(h, "m", "ready");
  h.autoscaler.removeModel("m");
  h.autoscaler.forgetModel("m");
  expect(await metricTier(h, "m")).toBeUndefined();
});

test("an engine restarted in place is a `ready → starting` change in snooze_tier_transitions_total, as its events say", async () => {
  // Found by a probe: the events said ready, starting, ready, and the counter had starting → ready
  // twice but nothing into `starting` the second time.
  const h = new Harness(yaml);
  const id = await h.serveCold("m");
  h.platform.restart(id, false);
  await h.settle();
  await agrees(h, "m", "starting");
  h.platform.bringUp(id);
  await h.settle();
  await agrees(h, "m", "ready");
  expect(h.tiers("m")).toEqual(["starting", "ready", "starting", "ready"]);
  const { values } = await h.registry.getSingleMetric("snooze_tier_transitions_total")!.get();
  const counted = Object.fromEntries(values.map((v) => [`${v.labels.from} → ${v.labels.to}`, v.value]));
  expect(counted).toEqual({ "cold → starting": 1, "starting → ready": 2, "ready → starting": 1 });
});

/** One Autoscaler on the manual clock with two Models of the id `m`, `team-a/m` and `team-b/m`, not added yet. */
function twoModelsOfOneId(options: { namespaced?: boolean } = {}) {
  const clock = new ManualClock();
  const config = parseConfig(`models:\n  m: { command: [engine, "\${PORT}"] }\n`, "test.yaml").models.get(
    "m",
  )!;
  const platform = new FakePlatform(["team-a/m", "team-b/m"], { clock, autoUp: true });
  const registry = new Registry();
  const autoscaler = new Autoscaler({
    platform,
    clock,
    log: silentLogger,
    registry,
    hostMemoryBudget: Number.POSITIVE_INFINITY,
    drainGraceMs: 0,
    activatorExpiryMs: Number.POSITIVE_INFINITY,
    selfHealIntervalMs: Number.POSITIVE_INFINITY,
    ...options,
  });
  return { clock, config, platform, registry, autoscaler };
}

test("two Models of one model id: snooze_replica_tier says the tier of the one that serves the id, not whichever changed last", async () => {
  // Before: each controller wrote the id's series as its replicas changed, so the gauge said the
  // tier of the Model that moved last, serving or not.
  const { clock, config, platform, registry, autoscaler } = twoModelsOfOneId();
  const older = autoscaler.addModel(
    { key: "team-a/m", config, minReplicas: 0, maxReplicas: 1, precedence: "1" },
    { holding: () => true },
  );
  const newer = autoscaler.addModel(
    { key: "team-b/m", config, minReplicas: 0, maxReplicas: 1, precedence: "2" },
    { holding: () => true },
  );
  older.lead();
  newer.lead();
  const tierOfM = async () => {
    const { values } = await registry.getSingleMetric("snooze_replica_tier")!.get();
    return values.filter((v) => v.labels.model === "m" && v.value === 1).map((v) => v.labels.tier);
  };
  // The Model that does not serve the id starts a replica (its own minimum, say): the id stays cold.
  await platform.scale("team-b/m", 0, 1, []);
  await clock.advanceAndSettle(1_000);
  expect(newer.tier).toBe("ready");
  expect(older.tier).toBe("cold");
  expect(await tierOfM()).toEqual(["cold"]);
});

test("on Kubernetes, Models of one id in two namespaces have their own series (a namespace label); one deleted takes only its own", async () => {
  // Before: snooze_tier_transitions_total, snooze_activation_duration_seconds and
  // snooze_gpu_seconds_total were labelled by the id alone, so two teams' Models of one id added
  // into one series, and the tier gauge showed one of them.
  const { clock, config, registry, autoscaler } = twoModelsOfOneId({ namespaced: true });
  for (const [key, precedence] of [
    ["team-a/m", "1"],
    ["team-b/m", "2"],
  ] as const)
    autoscaler
      .addModel({ key, config, minReplicas: 0, maxReplicas: 1, precedence }, { holding: () => true })
      .lead();
  await autoscaler.controllerByKey("team-b/m")!.wakeNow();
  await clock.advanceAndSettle(5_000);
  const series = async (name: string) =>
    (await registry.getSingleMetric(name)!.get()).values
      .filter((v) => v.value > 0 && !("le" in v.labels))
      .map((v) => JSON.stringify(v.labels))
      .sort();
  expect(await series("snooze_tier_transitions_total")).toEqual([
    JSON.stringify({ model: "m", namespace: "team-b", from: "cold", to: "starting" }),
    JSON.stringify({ model: "m", namespace: "team-b", from: "starting", to: "ready" }),
  ]);
  const counts = (await registry.getSingleMetric("snooze_activation_duration_seconds")!.get()).values.filter(
    (v) => (v as { metricName?: string }).metricName === "snooze_activation_duration_seconds_count",
  );
  expect(counts.map((v) => v.labels)).toEqual([
    { model: "m", namespace: "team-b", from: "cold", outcome: "ready" },
  ]);
  const tiers = (await registry.getSingleMetric("snooze_replica_tier")!.get()).values
    .filter((v) => v.value === 1)
    .map((v) => `${v.labels.namespace} ${v.labels.tier}`)
    .sort();
  expect(tiers).toEqual(["team-a cold", "team-b ready"]);
  const gpu = (await registry.getSingleMetric("snooze_gpu_seconds_total")!.get()).values;
  expect(new Set(gpu.map((v) => v.labels.namespace))).toEqual(new Set(["team-a", "team-b"]));
  expect(
    gpu.find((v) => v.labels.namespace === "team-b" && v.labels.state === "awake")?.value,
  ).toBeGreaterThan(0);
  expect(gpu.find((v) => v.labels.namespace === "team-a" && v.labels.state === "awake")?.value ?? 0).toBe(0);
  // team-a's Model deleted: its series go, team-b's stay.
  autoscaler.removeModel("team-a/m");
  autoscaler.forgetModel("m", "team-a/m");
  const left = (await registry.getSingleMetric("snooze_gpu_seconds_total")!.get()).values;
  expect(new Set(left.map((v) => v.labels.namespace))).toEqual(new Set(["team-b"]));
  expect(await series("snooze_tier_transitions_total")).toHaveLength(2);
});
