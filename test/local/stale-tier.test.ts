import type { Pool } from "undici";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { AdminModelView } from "../../activator/admin.ts";
import type { LocalSnooze } from "../../cli/local-snooze.ts";
import type { ReplicaEvent } from "../../lib/replica-event.ts";
import { chat, simCommand, startWith, until } from "../helpers/local-snooze.ts";

/**
 * Issue 12: a model stopped by `zeroAfter` showed `asleep-2`, and a `sleep: false` model showed
 * `draining`, while no engine ran: the cold event named a placeholder replica, so the activator kept
 * the stale backend (and its connection pool). The cold event must name the replica that went.
 */
let snooze: LocalSnooze;
const events: ReplicaEvent[] = [];
beforeAll(async () => {
  snooze = await startWith(`
models:
  zeroed:
    sleepAfter: 200ms
    zeroAfter: 300ms
    command: ${simCommand(["--enable-sleep-mode"])}
  awake-only:
    sleep: false
    sleepAfter: 200ms
    command: ${simCommand()}
`);
  snooze.autoscaler.watch((event) => events.push(event));
});
afterAll(() => snooze.close(1_000));

const adminView = async (id: string) => {
  const { models } = (await (await fetch(`${snooze.url}/snooze/v1/models`)).json()) as {
    models: AdminModelView[];
  };
  return models.find((m) => m.id === id)!;
};
const openAITier = async (id: string) =>
  ((await (await fetch(`${snooze.url}/v1/models/${id}`)).json()) as { snooze: { tier: string } }).snooze.tier;

describe("a model that went to zero shows cold, with nothing left behind", () => {
  test.each([
    ["zeroed", ["starting", "ready", "draining", "asleep-1", "cold"]],
    ["awake-only", ["starting", "ready", "draining", "cold"]],
  ])("%s", async (model, path) => {
    expect((await fetch(`${snooze.url}/v1/chat/completions`, chat(model))).status).toBe(200);
    const route = snooze.activator.routes.get(model)!;
    const [replica] = route.replicas();
    expect(replica?.tier).toBe("ready");
    // The connection pool the activator opened to the engine, to see it closed.
    const pool = (route as unknown as { backends: Map<string, { pool: Pool }> }).backends.get(
      replica!.id,
    )!.pool;

    await until(async () => (await adminView(model)).tier === "cold", 10_000, `${model} cold`);
    const view = await adminView(model);
    expect(view).toMatchObject({ tier: "cold", replicas: [] });
    expect(await openAITier(model)).toBe("cold");
    expect(route.tier).toBe("cold");
    expect(route.replicas()).toEqual([]);
    expect(pool.closed).toBe(true);
    expect(snooze.platform.replicaSet(model)?.replicas).toEqual([]);
    // Every event of the model named its one real replica, the cold one included.
    const mine = events.filter((e) => e.model === model);
    expect(new Set(mine.map((e) => e.replica))).toEqual(new Set([replica!.id]));
    expect(mine.map((e) => e.tier).filter((t, i, all) => t !== all[i - 1])).toEqual(path);
    // The page's timeline lists the stop.
    const timeline = (await (await fetch(`${snooze.url}/snooze/v1/timeline`)).json()) as {
      entries: { model: string; kind: string }[];
    };
    expect(timeline.entries.filter((e) => e.model === model).map((e) => e.kind)).toEqual(
      model === "zeroed" ? ["start", "sleep", "stop"] : ["start", "stop"],
    );
  });
});
