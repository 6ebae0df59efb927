import { setTimeout as sleep } from "node:timers/promises";
import { describe, expect, test } from "vitest";
import { group, version } from "../lib/kube/api-group.ts";
import { type KubeClient, KubeError, type KubeObject, paths, type WatchEvent } from "../lib/kube/client.ts";
import { silentLogger } from "../lib/log.ts";
import { KubeClusterReader } from "./cluster.ts";

const modelsPath = paths.custom(group, version, "models");
const slotsPath = paths.custom(group, version, "slots");

const object = (namespace: string, name: string, rest: Record<string, unknown> = {}) => ({
  metadata: { namespace, name, resourceVersion: "1" },
  ...rest,
});

/**
 * The part of KubeClient the reader uses, in memory: lists (which may fail a number of times
 * first), watches that stay open until aborted, and gets by path.
 */
class FakeApi {
  lists = new Map<string, KubeObject[]>();
  objects = new Map<string, unknown>();
  failLists = new Map<string, number>();
  calls: string[] = [];
  watchers = new Set<(event: WatchEvent<KubeObject>) => void>();

  client = {
    list: async <T>(path: string, query: Record<string, string> = {}) => {
      this.calls.push(`list ${path}${query.labelSelector ? `?${query.labelSelector}` : ""}`);
      const failures = this.failLists.get(path) ?? 0;
      if (failures > 0) {
        this.failLists.set(path, failures - 1);
        throw new KubeError(503, "ServiceUnavailable", "not yet");
      }
      return { metadata: { resourceVersion: "10" }, items: (this.lists.get(path) ?? []) as T[] };
    },
    watch: async <T>(
      path: string,
      _query: Record<string, string>,
      onEvent: (event: WatchEvent<T>) => void,
      signal: AbortSignal,
    ) => {
      this.calls.push(`watch ${path}`);
      const watcher = onEvent as (event: WatchEvent<KubeObject>) => void;
      this.watchers.add(watcher);
      await new Promise((resolve) => signal.addEventListener("abort", resolve, { once: true }));
      this.watchers.delete(watcher);
    },
    get: async <T>(path: string) => {
      this.calls.push(`get ${path}`);
      if (!this.objects.has(path)) throw new KubeError(404, "NotFound", `${path} not found`);
      return this.objects.get(path) as T;
    },
  } as unknown as KubeClient;
}

const reader = (api: FakeApi) =>
  new KubeClusterReader(api.client, silentLogger, { backoff: { initialMs: 5, maxMs: 5 } });

describe("KubeClusterReader", () => {
  test("is synced only once both lists arrived; failed lists are retried", async () => {
    const api = new FakeApi();
    api.lists.set(modelsPath, [
      object("team-a", "qwen", { spec: { workloadRef: { kind: "Deployment", name: "q" } } }),
    ]);
    api.lists.set(slotsPath, [object("team-a", "gpu-0", { spec: { device: "0" } })]);
    api.failLists.set(slotsPath, 3);
    const cluster = reader(api);
    const started = cluster.start();
    expect(cluster.synced).toBe(false);
    await started;
    expect(cluster.synced).toBe(true);
    expect(api.calls.filter((c) => c === `list ${slotsPath}`)).toHaveLength(4);
    expect(cluster.cachedSlot("team-a", "gpu-0")).toMatchObject({ spec: { device: "0" } });
    expect(cluster.cachedModel("team-a", "qwen")).toBeDefined();
    expect(cluster.cachedModel("team-b", "qwen")).toBeUndefined();
    expect(cluster.modelsReferencing("team-a", "Deployment", "q")).toHaveLength(1);
    expect(cluster.modelsReferencing("team-b", "Deployment", "q")).toHaveLength(0);
    await cluster.stop();
  });

  test("watch events reach the cache", async () => {
    const api = new FakeApi();
    const cluster = reader(api);
    await cluster.start();
    while (api.watchers.size < 2) await sleep(1);
    for (const watcher of api.watchers)
      watcher({ type: "ADDED", object: object("team-a", "gpu-1", { spec: { device: "1" } }) });
    expect(cluster.cachedSlot("team-a", "gpu-1")).toBeDefined();
    await cluster.stop();
  });

  test("stopped before the lists arrive: start rejects, nothing is listed again, no restart", async () => {
    const api = new FakeApi();
    api.failLists.set(modelsPath, 1_000_000);
    const cluster = reader(api);
    const started = expect(cluster.start()).rejects.toThrow(/stopped before the caches were filled/);
    await sleep(30);
    await cluster.stop();
    await started;
    expect(cluster.synced).toBe(false);
    const calls = api.calls.length;
    await sleep(30);
    expect(api.calls.length).toBe(calls);
    await expect(cluster.start()).rejects.toThrow(/does not start again/);
  });

  test("fresh reads go to the API by path; 404 is undefined", async () => {
    const api = new FakeApi();
    const ns = "team-a";
    const deployment = object(ns, "qwen", {
      metadata: { namespace: ns, name: "qwen", annotations: { "snooze.dev/slot": "gpu-0" } },
      spec: { replicas: 1, selector: { matchLabels: { app: "qwen" } } },
    });
    api.lists.set(paths.apps("deployments", ns), [deployment as KubeObject]);
    api.lists.set(paths.pods(ns), [
      object(ns, "qwen-1", { metadata: { name: "qwen-1", annotations: { "snooze.dev/tier": "ready" } } }),
    ]);
    api.objects.set(`${paths.apps("statefulsets", ns)}/db`, object(ns, "db"));
    api.objects.set(paths.lease("snooze-system", "snooze-slot-gpu-0"), { spec: { holderIdentity: "as-0" } });
    api.objects.set(`${paths.custom(group, version, "slots", ns)}/gpu-0`, {
      status: { transition: { to: "llama", step: "draining" } },
    });
    const cluster = reader(api);

    expect(await cluster.readWorkload(ns, "StatefulSet", "db")).toBeDefined();
    expect(await cluster.readWorkload(ns, "Deployment", "db")).toBeUndefined();
    expect(await cluster.readModel(ns, "nope")).toBeUndefined();
    expect(await cluster.leaseHolder("snooze-system", "gpu-0")).toBe("as-0");
    expect(await cluster.leaseHolder("snooze-system", "gpu-1")).toBeUndefined();
    expect(await cluster.slotState(ns, "gpu-0")).toEqual({
      residents: [{ kind: "Deployment", name: "qwen", tier: "ready" }],
      transition: { to: "llama", step: "draining" },
    });
    expect(api.calls).toContain(`list ${paths.pods(ns)}?app=qwen`);
    await cluster.stop();
  });

  test("an API error other than 404 is thrown (the server turns it into a denial)", async () => {
    const api = new FakeApi();
    api.client.get = async () => {
      throw new KubeError(403, "Forbidden", "no");
    };
    await expect(reader(api).readModel("team-a", "qwen")).rejects.toThrow(/no/);
  });
});
