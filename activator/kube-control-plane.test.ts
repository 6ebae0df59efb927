import { once } from "node:events";
import type { Server } from "node:http";
import type { AddressInfo } from "node:net";
import { type Context, propagation, ROOT_CONTEXT, trace } from "@opentelemetry/api";
import { W3CTraceContextPropagator } from "@opentelemetry/core";
import { Registry } from "prom-client";
import { afterEach, expect, test, vi } from "vitest";
import type { KubeAutoscaler } from "../autoscaler/kube/autoscaler.ts";
import { createControlServer } from "../autoscaler/kube/control-server.ts";
import { modelForRevision } from "../autoscaler/kube/knative/revision-model.ts";
import type { AdminOutcome } from "../lib/control-protocol.ts";
import { freePort } from "../lib/free-port.ts";
import type { KubeClient } from "../lib/kube/client.ts";
import { createLogger, silentLogger } from "../lib/log.ts";
import type { ReplicaEvent } from "../lib/replica-event.ts";
import { Activator } from "./activator.ts";
import { AdminActionUnfinished, SleepStoppedInstead } from "./admin.ts";
import { KubeControlPlane } from "./kube-control-plane.ts";

let server: Server | undefined;
afterEach(() => {
  server?.close();
  server = undefined;
});

/** The activator's ServiceAccount, as the control server's TokenReview would name it. */
const activatorAccount = async () => ({
  ok: true as const,
  username: "system:serviceaccount:snooze-system:snooze-activator",
});

/** The autoscaler's real control server in front of `autoscaler`, listening; its URL. */
async function controlServerFor(
  autoscaler: object,
  port = 0,
  authenticate: Parameters<typeof createControlServer>[2]["authenticate"] = activatorAccount,
): Promise<string> {
  server = createControlServer(autoscaler as KubeAutoscaler, new Registry(), { authenticate });
  server.listen(port, "127.0.0.1");
  await once(server, "listening");
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/**
 * The activator's control plane against the autoscaler's real control server, whose admin action
 * (the Model's leader carrying it out) answers `outcome`; the calls it got are recorded.
 */
async function againstAutoscaler(outcome: AdminOutcome, port = 0) {
  const calls: unknown[][] = [];
  const autoscaler = {
    modelDemand: { handle: () => false },
    admin: async (...args: unknown[]) => {
      calls.push(args);
      return outcome;
    },
  };
  const url = await controlServerFor(autoscaler, port, async (token) =>
    token === "sa-token"
      ? activatorAccount()
      : { ok: false, status: 401, message: "not a ServiceAccount of Snooze" },
  );
  const plane = new KubeControlPlane({
    client: { bearerToken: async () => "sa-token" } as unknown as KubeClient,
    autoscalerUrl: url,
    identity: "activator-0",
    log: silentLogger,
    onModel: () => {},
    onModelRemoved: () => {},
  });
  return { plane, calls };
}

test("a sleep or stop the Model's leader could not finish (504) is AdminActionUnfinished naming the tier, as in local mode", async () => {
  const { plane, calls } = await againstAutoscaler({
    status: 504,
    message: "stop: timed-out",
    tier: "ready",
  });
  const failed = await plane.admin("qwen", "stop").catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(AdminActionUnfinished);
  expect((failed as Error).message).toBe("The stop of qwen did not finish in its time: the model is ready.");
  // No caller's trace (the fifth): none was given.
  expect(calls).toEqual([["qwen", "stop", false, undefined, undefined]]);
});

test("a sleep a request took back on the leader says so, not a tier caught mid-drain", async () => {
  const { plane } = await againstAutoscaler({
    status: 504,
    message: "sleep: taken-back",
    tier: "draining",
    takenBack: true,
  });
  await expect(plane.admin("qwen", "sleep")).rejects.toThrow(
    "The sleep of qwen was taken back: a request (or a wake) came for it after it was asked, so the model stays awake (or is awake again for it); ask again once it is idle.",
  );
});

test("a sleep the engine failed on the leader (stopped instead) is SleepStoppedInstead with the reason, as in local mode", async () => {
  const { plane } = await againstAutoscaler({
    status: 502,
    message: "POST /sleep?level=1&mode=wait answered 500: boom",
    tier: "cold",
    stoppedInstead: true,
  });
  const failed = await plane.admin("qwen", "sleep").catch((error: unknown) => error);
  expect(failed).toBeInstanceOf(SleepStoppedInstead);
  expect((failed as Error).message).toBe(
    "The sleep of qwen failed (POST /sleep?level=1&mode=wait answered 500: boom); its engine was stopped instead, so the model is cold and its next request starts it.",
  );
});

test("done is done; another failure carries the autoscaler's message; a wake is never 'unfinished'", async () => {
  const done = await againstAutoscaler({ status: 200, message: "sleep: done", tier: "asleep-1" });
  await expect(done.plane.admin("qwen", "sleep")).resolves.toMatchObject({ tier: "asleep-1" });
  server!.close();
  const leaderless = await againstAutoscaler({
    status: 503,
    message: "no autoscaler leads qwen right now; retry",
  });
  await expect(leaderless.plane.admin("qwen", "sleep")).rejects.toThrow(
    "no autoscaler leads qwen right now; retry",
  );
  server!.close();
  const wake = await againstAutoscaler({ status: 504, message: "wake: timed out" });
  const failed = await wake.plane.admin("qwen", "wake").catch((error: unknown) => error);
  expect(failed).not.toBeInstanceOf(AdminActionUnfinished);
  expect((failed as Error).message).toBe("wake: timed out");
});

test("a wake or prewarm asked by a traced caller (an incoming event) carries its trace to the Model's leader (found by an outside tester)", async () => {
  propagation.setGlobalPropagator(new W3CTraceContextPropagator());
  try {
    const { plane, calls } = await againstAutoscaler({ status: 200, message: "wake: done", tier: "ready" });
    const caller = trace.setSpanContext(ROOT_CONTEXT, {
      traceId: "4bf92f3577b34da6a3ce929d0e0e4736",
      spanId: "00f067aa0ba902b7",
      traceFlags: 1,
      isRemote: true,
    });
    await plane.admin("qwen", "wake", undefined, caller);
    await plane.admin("qwen", "prewarm", { forMs: 60_000 }, caller);
    await plane.admin("qwen", "wake");
    const seen = calls.map((args) =>
      args[4] ? trace.getSpanContext(args[4] as Context)?.spanId : undefined,
    );
    expect(seen).toEqual(["00f067aa0ba902b7", "00f067aa0ba902b7", undefined]);
  } finally {
    propagation.disable();
  }
});

/**
 * A KubeClient whose collections are lists the test fills and whose watches it feeds: the Models
 * and pods an activator sees, without an API server (the e2e suite runs the real one).
 */
function watchedCluster() {
  const watchers = new Map<
    string,
    (event: { type: "ADDED" | "MODIFIED" | "DELETED"; object: unknown }) => void
  >();
  const client = {
    bearerToken: async () => "sa-token",
    list: async () => ({ metadata: { resourceVersion: "1" }, items: [] }),
    watch: (path: string, _q: unknown, onEvent: never, signal: AbortSignal) => {
      watchers.set(path.includes("/models") ? "models" : "pods", onEvent);
      return new Promise<void>((resolve) => signal.addEventListener("abort", () => resolve()));
    },
  } as unknown as KubeClient;
  const push = (kind: "models" | "pods", type: "ADDED" | "MODIFIED" | "DELETED", object: unknown) =>
    watchers.get(kind)?.({ type, object });
  return { client, push, watching: () => watchers.size === 2 };
}

test("a Model's back-off reaches the activator from its status: told again at each failure, and when it ended early", async () => {
  // Found in review: the activator never learned a back-off on Kubernetes (the status had no
  // retryAt), and a second failure with the same message was not told at all.
  const cluster = watchedCluster();
  const plane = new KubeControlPlane({
    client: cluster.client,
    autoscalerUrl: "http://127.0.0.1:1",
    identity: "activator-0",
    log: silentLogger,
    onModel: () => {},
    onModelRemoved: () => {},
  });
  const events: ReplicaEvent[] = [];
  plane.watch((event) => events.push(event));
  await plane.start();
  await vi.waitFor(() => expect(cluster.watching()).toBe(true));
  const failedSince = "2026-03-01T10:00:00Z";
  const model = (resourceVersion: string, status: Record<string, unknown>) => ({
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Model",
    metadata: { name: "qwen", namespace: "ml", resourceVersion },
    spec: { workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" } },
    status: { selector: "app=qwen", ...status },
  });
  const failed = (message: string, retryAt?: number) => ({
    conditions: [
      {
        type: "ActivationFailed",
        status: "True",
        reason: "ActivationFailed",
        message,
        lastTransitionTime: failedSince,
      },
    ],
    replicaTiers: [{ pod: "qwen-1", tier: "asleep-1", since: failedSince }],
    ...(retryAt !== undefined ? { retryAt: new Date(retryAt).toISOString() } : {}),
  });
  const retryAt = Date.parse("2030-01-01T00:00:00.250Z");
  cluster.push("models", "ADDED", model("2", failed("wake of qwen failed: boom", retryAt)));
  expect(events.at(-1)).toMatchObject({
    model: "qwen",
    replica: "qwen/activation",
    tier: "asleep-1",
    error: "wake of qwen failed: boom",
    retryAt,
  });
  // The same status again (a resync) is not news; the same failure again, with a new back-off, is.
  const told = events.length;
  cluster.push("models", "MODIFIED", model("3", failed("wake of qwen failed: boom", retryAt)));
  expect(events.length).toBe(told);
  cluster.push("models", "MODIFIED", model("4", failed("wake of qwen failed: boom", retryAt + 2_000)));
  expect(events.at(-1)).toMatchObject({ error: "wake of qwen failed: boom", retryAt: retryAt + 2_000 });
  // Moved earlier, the failure's condition unchanged: the back-off ended early (a person's stop).
  cluster.push("models", "MODIFIED", model("4a", failed("wake of qwen failed: boom", retryAt - 60_000)));
  expect(events.at(-1)?.error).toBeUndefined();
  expect(events.at(-1)?.retryAt).toBe(retryAt - 60_000);
  // The failure is over (a reload changed the engine): the back-off ended, said once.
  const before = Date.now();
  const over = {
    conditions: [
      {
        type: "ActivationFailed",
        status: "False",
        reason: "NoFailure",
        message: "the last activation succeeded",
      },
    ],
  };
  cluster.push("models", "MODIFIED", model("5", over));
  const ended = events.at(-1)!;
  expect(ended.error).toBeUndefined();
  expect(ended.retryAt).toBeGreaterThanOrEqual(before);
  cluster.push("models", "MODIFIED", model("6", over));
  expect(events.at(-1)).toBe(ended);
  await plane.stop();
});

test("slots name their members by the model ids models are listed by, not the autoscaler's namespace/name keys", async () => {
  // Found in review: `snooze wake` of a slot member looks for its model id among the waiting, and
  // on Kubernetes never found it (the autoscaler keys members `namespace/name`).
  const cluster = watchedCluster();
  const slots = [
    {
      name: "gpu-0",
      policy: "fifo",
      members: ["ml/qwen-object", "ml/llama"],
      resident: "ml/llama",
      transition: { to: "ml/qwen-object", from: "ml/llama", step: "draining", since: "2026-03-01T10:00:00Z" },
      waiting: [{ model: "ml/qwen-object", held: 0, wake: true, waitingMs: 50 }],
      swaps: 1,
      lastSwap: { from: "ml/qwen-object", to: "ml/llama", at: "2026-03-01T09:00:00Z", durationMs: 900 },
      maxResidents: 1,
    },
  ];
  const autoscaler = { modelDemand: { handle: () => false }, slotStatuses: async () => slots };
  const plane = new KubeControlPlane({
    client: cluster.client,
    autoscalerUrl: await controlServerFor(autoscaler),
    identity: "activator-0",
    log: silentLogger,
    onModel: () => {},
    onModelRemoved: () => {},
  });
  await plane.start();
  await vi.waitFor(() => expect(cluster.watching()).toBe(true));
  // The Model qwen-object serves the model id `qwen`; llama's id is its name.
  cluster.push("models", "ADDED", {
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Model",
    metadata: { name: "qwen-object", namespace: "ml", resourceVersion: "2" },
    spec: {
      model: "qwen",
      slot: "gpu-0",
      workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "qwen" },
    },
    status: { selector: "app=qwen" },
  });
  cluster.push("models", "ADDED", {
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Model",
    metadata: { name: "llama", namespace: "ml", resourceVersion: "3" },
    spec: { slot: "gpu-0", workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name: "llama" } },
    status: { selector: "app=llama" },
  });
  try {
    const [slot] = await plane.slots();
    expect(slot).toMatchObject({
      members: ["qwen", "llama"],
      resident: "llama",
      transition: { to: "qwen", from: "llama" },
      waiting: [{ model: "qwen", wake: true }],
      lastSwap: { from: "qwen", to: "llama" },
    });
  } finally {
    await plane.stop();
  }
});

test("an autoscaler that cannot be reached is said once (then once a minute), not at every report; and when it answers again", async () => {
  // Found by an outside tester: one warning a second (each stats report) and one per demand, for as
  // long as the autoscaler was down.
  const port = await freePort();
  const lines: string[] = [];
  const plane = new KubeControlPlane({
    client: { bearerToken: async () => "sa-token" } as unknown as KubeClient,
    autoscalerUrl: `http://127.0.0.1:${port}`,
    identity: "activator-0",
    log: createLogger({}, (line) => lines.push(line)),
    onModel: () => {},
    onModelRemoved: () => {},
  });
  const said = (msg: string) => lines.map((line) => JSON.parse(line)).filter((line) => line.msg === msg);
  for (let i = 1; i <= 5; i++) {
    plane.stats("qwen", { inFlight: 0, held: 1 });
    plane.demand("qwen");
    await vi.waitFor(() => expect(plane.counts.failures).toBe(2 * i));
  }
  expect(said("could not reach the autoscaler")).toHaveLength(1);
  expect(said("could not reach the autoscaler")[0].error).toMatchObject({ cause: { code: "ECONNREFUSED" } });
  const { calls } = await againstAutoscaler({ status: 200, message: "done" }, port);
  plane.stats("qwen", { inFlight: 0, held: 1 });
  await vi.waitFor(() =>
    expect(said("the autoscaler answers again")).toEqual([expect.objectContaining({ repeated: 9 })]),
  );
  expect(calls).toEqual([]);
});

test("the replicas held requests wait for alone reach the autoscaler with the demand and the stats, through its real control server", async () => {
  const bodies: unknown[] = [];
  const autoscaler = {
    modelDemand: { handle: () => false },
    demand: (body: unknown) => void bodies.push(body),
    stats: (body: unknown) => void bodies.push(body),
  };
  const plane = new KubeControlPlane({
    client: { bearerToken: async () => "sa-token" } as unknown as KubeClient,
    autoscalerUrl: await controlServerFor(autoscaler),
    identity: "activator-0",
    log: silentLogger,
    onModel: () => {},
    onModelRemoved: () => {},
  });
  plane.demand("qwen", { load: { inFlight: 0, held: 2, pinnedTo: ["qwen-abc"] } });
  await vi.waitFor(() => expect(bodies).toHaveLength(1));
  plane.stats("qwen", { inFlight: 0, held: 2, oldestHeldMs: 5, pinnedTo: ["qwen-abc"] });
  await vi.waitFor(() => expect(bodies).toHaveLength(2));
  expect(bodies[0]).toMatchObject({ model: "qwen", held: 2, pinnedTo: ["qwen-abc"] });
  expect(bodies[1]).toMatchObject({ models: [{ model: "qwen", held: 2, pinnedTo: ["qwen-abc"] }] });
  // None pinned: no field at all, as before.
  plane.stats("qwen", { inFlight: 0, held: 1 });
  await vi.waitFor(() => expect(bodies).toHaveLength(3));
  expect((bodies[2] as { models: object[] }).models[0]).not.toHaveProperty("pinnedTo");
});

test("two Models of one model id: the oldest gets its requests whatever order they were seen in, and the other the moment it is deleted", async () => {
  // Found by a probe: the first Model seen won, so activators and a restarted autoscaler could
  // each pick another one (the autoscaler woke one Model's pods, the activators waited for the
  // other's); and once the winner was deleted, the other was not served until some Model changed.
  const cluster = watchedCluster();
  const plane = new KubeControlPlane({
    client: cluster.client,
    autoscalerUrl: "http://127.0.0.1:1",
    identity: "activator-0",
    log: silentLogger,
    onModel: () => {},
    onModelRemoved: () => {},
  });
  const events: ReplicaEvent[] = [];
  plane.watch((event) => events.push(event));
  await plane.start();
  await vi.waitFor(() => expect(cluster.watching()).toBe(true));
  const model = (name: string, created: string) => ({
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Model",
    metadata: { name, namespace: "ml", resourceVersion: "2", creationTimestamp: created },
    spec: { model: "qwen", workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name } },
    status: { selector: `app=${name}` },
  });
  const pod = (app: string, ip: string) => ({
    apiVersion: "v1",
    kind: "Pod",
    metadata: {
      name: `${app}-1`,
      namespace: "ml",
      resourceVersion: "3",
      labels: { app },
      annotations: { "snooze.dev/tier": "ready", "snooze.dev/tier-since": "2026-03-01T10:00:00Z" },
    },
    status: {
      phase: "Running",
      podIP: ip,
      conditions: [{ type: "ContainersReady", status: "True" }],
    },
  });
  // The younger one is seen first.
  const younger = model("qwen-new", "2026-03-01T10:05:00Z");
  const older = model("qwen-old", "2026-03-01T10:00:00Z");
  cluster.push("models", "ADDED", younger);
  cluster.push("models", "ADDED", older);
  cluster.push("pods", "ADDED", pod("qwen-new", "10.0.0.2"));
  cluster.push("pods", "ADDED", pod("qwen-old", "10.0.0.1"));
  const routed = () => {
    const last = new Map<string, string>();
    for (const e of events) if (e.model === "qwen") last.set(e.replica, e.tier);
    return Object.fromEntries([...last].filter(([, tier]) => tier !== "cold"));
  };
  expect(routed()).toEqual({ "qwen-old-1": "ready" });
  // The older one deleted: the younger one's pods are the id's replicas now, the older one's not.
  cluster.push("models", "DELETED", older);
  expect(routed()).toEqual({ "qwen-new-1": "ready" });
  await plane.stop();
});

/** A real Activator fed by the control plane from a watched fake cluster, watching already. */
async function activatorOnWatchedCluster() {
  const cluster = watchedCluster();
  let activator: Activator | undefined;
  const plane = new KubeControlPlane({
    client: cluster.client,
    autoscalerUrl: "http://127.0.0.1:1",
    identity: "activator-0",
    log: silentLogger,
    removalGraceMs: 0,
    onModel: (config) => activator?.upsertModel(config),
    onModelRemoved: (id) => activator?.removeModel(id),
  });
  activator = new Activator({
    config: {
      models: new Map(),
      names: new Map(),
      slots: new Map(),
      hostMemoryBudget: Infinity,
      maxBodySize: 1 << 20,
    },
    controlPlane: plane,
    registry: new Registry(),
    log: silentLogger,
  });
  await plane.start();
  await vi.waitFor(() => expect(cluster.watching()).toBe(true));
  return { cluster, plane, activator };
}

test("Models that list one alias: the oldest has it whatever order they were seen in, a model id goes first, and a deleted holder hands it on", async () => {
  // Found by a probe: an alias two Models listed went to whichever the activator saw first, and
  // once that one let go of it, the other did not get it until its Model changed.
  const { cluster, plane, activator } = await activatorOnWatchedCluster();
  const model = (name: string, created: string, aliases: string[]) => ({
    apiVersion: "snooze.dev/v1alpha1",
    kind: "Model",
    metadata: { name, namespace: "ml", resourceVersion: "2", creationTimestamp: created },
    spec: { aliases, workloadRef: { apiVersion: "apps/v1", kind: "Deployment", name } },
    status: { selector: `app=${name}` },
  });
  // The younger one is seen first; a third names an alias after the older one's id.
  const younger = model("qwen-new", "2026-03-01T10:05:00Z", ["qwen", "small"]);
  const older = model("qwen-old", "2026-03-01T10:00:00Z", ["qwen"]);
  cluster.push("models", "ADDED", younger);
  expect(activator.modelNamed("qwen")).toBe("qwen-new");
  cluster.push("models", "ADDED", older);
  expect(activator.modelNamed("qwen")).toBe("qwen-old");
  expect(activator.modelNamed("small")).toBe("qwen-new");
  cluster.push("models", "ADDED", model("other", "2026-03-01T09:00:00Z", ["qwen-new"]));
  expect(activator.modelNamed("qwen-new")).toBe("qwen-new");
  // The older one deleted: once its route is gone, the alias is the younger one's.
  cluster.push("models", "DELETED", older);
  await vi.waitFor(() => expect(activator.modelNamed("qwen")).toBe("qwen-new"));
  await plane.stop();
  await activator.shutdown(100);
});

test("Knative revisions whose template lists an alias: it reaches the newest ready revision, as the Route's latest traffic", async () => {
  // Every revision's Model lists the template's `snooze.dev/aliases`; by the oldest-first rule the
  // alias woke the revision a rollout had left (and was then dropped from revisions altogether).
  // Of one Configuration's revisions, the newest ready one has it (model-precedence.ts).
  const { cluster, plane, activator } = await activatorOnWatchedCluster();
  const revision = (name: string, generation: number, created: string, ready: boolean) => {
    const { model } = modelForRevision({
      apiVersion: "autoscaling.internal.knative.dev/v1alpha1",
      kind: "PodAutoscaler",
      metadata: {
        name,
        namespace: "ml",
        uid: `${name}-uid`,
        labels: {
          "serving.knative.dev/configuration": "qwen",
          "serving.knative.dev/configurationGeneration": String(generation),
        },
        annotations: { "autoscaling.knative.dev/class": "snooze.dev", "snooze.dev/aliases": "chat" },
      },
      spec: { scaleTargetRef: { apiVersion: "apps/v1", kind: "Deployment", name: `${name}-deployment` } },
    });
    return {
      ...model!,
      metadata: { ...model!.metadata, resourceVersion: "2", creationTimestamp: created },
      status: {
        selector: `serving.knative.dev/revision=${name}`,
        // As the autoscaler writes it once the revision's PA has its scale target initialized.
        conditions: [{ type: "RevisionReady", status: ready ? "True" : "False" }],
      },
    };
  };
  cluster.push("models", "ADDED", revision("qwen-00001", 1, "2026-03-01T10:00:00Z", true));
  expect(activator.modelNamed("chat")).toBe("qwen-00001");
  // A rollout: the new revision's Model comes before its pods are up; the alias stays.
  cluster.push("models", "ADDED", revision("qwen-00002", 2, "2026-03-01T11:00:00Z", false));
  expect(activator.modelNamed("qwen-00002")).toBe("qwen-00002");
  expect(activator.modelNamed("chat")).toBe("qwen-00001");
  // Ready (its Model's status says RevisionReady): the alias follows it.
  cluster.push("models", "MODIFIED", revision("qwen-00002", 2, "2026-03-01T11:00:00Z", true));
  expect(activator.modelNamed("chat")).toBe("qwen-00002");
  await plane.stop();
});
