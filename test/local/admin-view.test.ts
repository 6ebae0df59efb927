import { afterEach, expect, test } from "vitest";
import type { LocalPlatform } from "../../autoscaler/local/platform.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import { isResident, type Tier } from "../../lib/replica-event.ts";
import { chat, sharedGpu, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * The admin view is the truth: sampled all along swaps, a crash and a stop, it never shows two
 * members of a slot resident, and it never lists as awake an engine that is dead.
 */
let snooze: LocalSnooze | undefined;
afterEach(async () => {
  await snooze?.close(1_000);
  snooze = undefined;
});

interface View {
  id: string;
  tier: Tier;
  replicas: { id: string; tier: Tier }[];
}

const alive = (pid: number | undefined) => {
  if (pid === undefined) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

test("sampled during swaps, a crash and a stop: never two residents, never a dead engine shown awake", async () => {
  const gpu = sharedGpu();
  snooze = await startWith(`
slots:
  gpu0: { minResidency: 0s, swapCooldown: 0s }
models:
  a: { slot: gpu0, command: ${simCommand(gpu)} }
  b: { slot: gpu0, command: ${simCommand(gpu)} }
`);
  const platform = snooze.platform as LocalPlatform;
  const problems: string[] = [];
  let samples = 0;
  let sampling = true;
  /**
   * Replicas whose engine died on purpose, and when: killed by the test, or seen dead while
   * draining (a stop ends in death, and the replica stays listed until its process group is
   * gone). After a moment to notice, they must be gone from the view.
   */
  const killed = new Map<string, number>();
  const sampler = (async () => {
    while (sampling && snooze) {
      const { models } = (await (await fetch(`${snooze!.url}/snooze/v1/models`)).json()) as {
        models: View[];
      };
      samples++;
      const residents = models.filter((m) => isResident(m.tier)).map((m) => m.id);
      if (residents.length > 1) problems.push(`two residents: ${residents.join(", ")}`);
      for (const model of models)
        for (const replica of model.replicas) {
          if (!killed.has(replica.id) && replica.tier === "draining" && !alive(platform.pid(replica.id)))
            killed.set(replica.id, performance.now());
          const killedAt = killed.get(replica.id);
          if (killedAt !== undefined && performance.now() - killedAt > 1_000)
            problems.push(`${replica.id} listed as ${replica.tier} a second after its engine died`);
          else if (killedAt === undefined && isResident(replica.tier) && !alive(platform.pid(replica.id)))
            problems.push(`${replica.id} listed as ${replica.tier} with no engine`);
        }
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  })();
  const ask = async (model: string) => {
    const response = await fetch(`${snooze!.url}/v1/chat/completions`, chat(model, { max_tokens: 2 }));
    expect(response.status, `${model}: ${await response.text()}`).toBe(200);
  };
  for (const model of ["a", "b", "a", "b"]) await ask(model);

  // b's engine dies while it holds the slot: the view drops it; the next request for a is served.
  const b = snooze.autoscaler.controller("b")!.state();
  killed.set(b.replica!, performance.now());
  process.kill(-platform.pid(b.replica!)!, "SIGKILL");
  await until(() => snooze!.autoscaler.controller("b")!.tier === "cold", 5_000, "b cold after its crash");
  await ask("a");

  // An admin stop answers once the engine is gone, and the view says so at that moment.
  const stop = await fetch(`${snooze.url}/snooze/v1/models/a/stop`, { method: "POST" });
  expect(stop.status).toBe(200);
  const listing = await fetch(`${snooze.url}/snooze/v1/models`);
  // Live state: no cache keeps it, no browser sniffs it as anything but JSON.
  expect(listing.headers.get("cache-control")).toBe("no-store");
  expect(listing.headers.get("x-content-type-options")).toBe("nosniff");
  const { models } = (await listing.json()) as { models: View[] };
  expect(models.find((m) => m.id === "a")).toMatchObject({ tier: "cold", replicas: [] });
  sampling = false;
  await sampler;
  expect(samples).toBeGreaterThan(20);
  expect(problems).toEqual([]);
}, 30_000);
